// blit.wgsl: copies the rendered frame (rgba8unorm, sRGB-encoded values) to
// a window surface of the same size.
//
// Bindings, group 0:
//   0  src  texture_2d<f32>  the rendered frame
//
// Draw: 3 vertices (one triangle covering the target), no vertex buffers.
// Entry points: fs_blit for a non-sRGB surface, fs_blit_srgb for an sRGB one.

@group(0) @binding(0) var src: texture_2d<f32>;

@vertex
fn vs_blit(@builtin(vertex_index) v: u32) -> @builtin(position) vec4<f32> {
    let x = f32((v << 1u) & 2u);
    let y = f32(v & 2u);
    return vec4<f32>(x * 2.0 - 1.0, 1.0 - y * 2.0, 0.0, 1.0);
}

@fragment
fn fs_blit(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    return textureLoad(src, vec2<i32>(p.xy), 0);
}

// fs_blit_srgb is fs_blit for an sRGB surface, which encodes what it is
// given: decode first so the picture is not brightened twice.
@fragment
fn fs_blit_srgb(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    let c = textureLoad(src, vec2<i32>(p.xy), 0);
    let lin = select(pow((c.rgb + 0.055) / 1.055, vec3<f32>(2.4)), c.rgb / 12.92, c.rgb <= vec3<f32>(0.04045));
    return vec4<f32>(lin, c.a);
}
