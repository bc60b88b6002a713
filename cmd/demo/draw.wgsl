// draw.wgsl: the demo's picture. All colours are written as sRGB-encoded
// values into an rgba8unorm target (blit.wgsl copies it to a window).
//
// Bindings, group 0:
//   0  frame  uniform  Frame
//
// Vertex buffers:
//   vs_point  slot 0: layout position (float32x2, per instance)
//             slot 1: similarity score (float32, per instance): the index's own,
//                     from ondevice.ScoreInto
//   vs_ring   slot 0: layout position of a top-k hit (float32x2, per instance)
//   vs_marker: none
//
// Draw calls: vs_point 6 vertices × rows instances; vs_ring 6 × k;
// vs_marker 6 × 1.

struct Frame {
    viewport: vec2<f32>,  // target size in pixels
    center: vec2<f32>,    // layout point at the middle of the target
    scale: f32,           // pixels per layout unit
    point_radius: f32,    // pixels
    ring_radius: f32,     // pixels
    _pad: f32,
    cursor: vec2<f32>,    // pixel position of the query
    lo_key: i32,          // lowest score this frame, as an order key (see bounds.wgsl)
    hi_key: i32,          // highest score this frame
}

@group(0) @binding(0) var<uniform> frame: Frame;

// The ring colour is exact in 8 bits and absent from the colour map, so a
// test can find the rings in a screenshot.
const RING = vec3<f32>(0.0, 1.0, 1.0);
const OUTLINE = vec3<f32>(0.02, 0.02, 0.04);

fn from_key(k: i32) -> f32 {
    return bitcast<f32>(select(k, k ^ 0x7fffffff, k < 0));
}

fn corner(v: u32) -> vec2<f32> {
    var c = array<vec2<f32>, 6>(
        vec2<f32>(-1.0, -1.0), vec2<f32>(1.0, -1.0), vec2<f32>(1.0, 1.0),
        vec2<f32>(-1.0, -1.0), vec2<f32>(1.0, 1.0), vec2<f32>(-1.0, 1.0));
    return c[v];
}

fn to_pixel(p: vec2<f32>) -> vec2<f32> {
    return frame.viewport * 0.5 + (p - frame.center) * frame.scale * vec2<f32>(1.0, -1.0);
}

fn to_clip(px: vec2<f32>, depth: f32) -> vec4<f32> {
    return vec4<f32>(px.x / frame.viewport.x * 2.0 - 1.0, 1.0 - px.y / frame.viewport.y * 2.0, depth, 1.0);
}

// inferno: a perceptually uniform map from dark purple to pale yellow
// (polynomial fit by Matt Zucker, CC0).
fn inferno(t: f32) -> vec3<f32> {
    let c0 = vec3<f32>(0.0002189403691192265, 0.001651004631001012, -0.01948089843709184);
    let c1 = vec3<f32>(0.1065134194856116, 0.5639564367884091, 3.932712388889277);
    let c2 = vec3<f32>(11.60249308247187, -3.972853965665698, -15.9423941062914);
    let c3 = vec3<f32>(-41.70399613139459, 17.43639888205313, 44.35414519872813);
    let c4 = vec3<f32>(77.162935699427, -33.40235894210092, -81.80730925738993);
    let c5 = vec3<f32>(-71.31942824499214, 32.62606426397723, 73.20951985803202);
    let c6 = vec3<f32>(25.13112622477341, -12.24266895238567, -23.07032500287172);
    return clamp(c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * (c5 + t * c6))))), vec3<f32>(0.0), vec3<f32>(1.0));
}

struct PointOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) offset: vec2<f32>, // pixels from the centre
    @location(1) radius: f32,
    @location(2) t: f32,
}

@vertex
fn vs_point(@builtin(vertex_index) v: u32, @location(0) p: vec2<f32>, @location(1) score: f32) -> PointOut {
    let lo = from_key(frame.lo_key);
    let hi = from_key(frame.hi_key);
    let t = clamp((score - lo) / max(hi - lo, 1e-6), 0.0, 1.0);
    let r = frame.point_radius * (0.75 + 1.0 * t * t * t);
    let off = corner(v) * (r + 1.0);
    var out: PointOut;
    // Nearer points are drawn in front: depth falls as the score rises.
    out.clip = to_clip(to_pixel(p) + off, 1.0 - 0.999 * t);
    out.offset = off;
    out.radius = r;
    out.t = t;
    return out;
}

@fragment
fn fs_point(in: PointOut) -> @location(0) vec4<f32> {
    let d = length(in.offset);
    if (d > in.radius) {
        discard;
    }
    // Squaring keeps the middle of the range dark, so the neighbourhood of
    // the query stands out; the map starts at a purple that still shows.
    let base = inferno(0.1 + 0.9 * in.t * in.t);
    let edge = smoothstep(in.radius - 1.0, in.radius, d);
    return vec4<f32>(mix(base, base * 0.4, edge), 1.0);
}

struct RingOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) offset: vec2<f32>,
}

@vertex
fn vs_ring(@builtin(vertex_index) v: u32, @location(0) p: vec2<f32>) -> RingOut {
    let off = corner(v) * (frame.ring_radius + 4.0);
    var out: RingOut;
    out.clip = to_clip(to_pixel(p) + off, 0.0);
    out.offset = off;
    return out;
}

@fragment
fn fs_ring(in: RingOut) -> @location(0) vec4<f32> {
    let e = abs(length(in.offset) - frame.ring_radius);
    if (e < 1.25) {
        return vec4<f32>(RING, 1.0);
    }
    if (e < 2.5) {
        return vec4<f32>(OUTLINE, 1.0);
    }
    discard;
    return vec4<f32>(0.0);
}

@vertex
fn vs_marker(@builtin(vertex_index) v: u32) -> RingOut {
    let off = corner(v) * 14.0;
    var out: RingOut;
    out.clip = to_clip(frame.cursor + off, 0.0);
    out.offset = off;
    return out;
}

// The query marker: a white cross hair with a dark outline.
@fragment
fn fs_marker(in: RingOut) -> @location(0) vec4<f32> {
    let a = abs(in.offset);
    let arm = min(a.x, a.y) < 1.0 && max(a.x, a.y) > 4.0 && max(a.x, a.y) < 12.0;
    if (arm) {
        return vec4<f32>(1.0, 1.0, 1.0, 1.0);
    }
    let halo = min(a.x, a.y) < 2.2 && max(a.x, a.y) > 2.8 && max(a.x, a.y) < 13.2;
    if (halo) {
        return vec4<f32>(OUTLINE, 1.0);
    }
    discard;
    return vec4<f32>(0.0);
}
