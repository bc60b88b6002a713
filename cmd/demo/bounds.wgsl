// bounds.wgsl: the lowest and highest of the frame's scores, for the colour
// scale. The scores are the index's own (ondevice.ScoreInto: the engine's
// scores.wgsl, cosine over unit rows and the unit query); this pass only
// reduces them.
//
// Bindings, group 0:
//   0  scores  storage, read        array<f32>             one score per row (the index's buffer)
//   1  bounds  storage, read_write  array<atomic<i32>, 2>  lowest and highest score as order keys;
//                                                          the host resets them to (MAX, MIN) each frame
//   2  params  uniform              Params
//
// Dispatch (grid_x, grid_y) workgroups of 64 covering the rows.

struct Params {
    rows: u32,
    grid_x: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> scores: array<f32>;
@group(0) @binding(1) var<storage, read_write> bounds: array<atomic<i32>, 2>;
@group(0) @binding(2) var<uniform> params: Params;

// order_key maps a float to an i32 that sorts the same way, so atomicMin
// and atomicMax can reduce floats. It is its own inverse.
fn order_key(f: f32) -> i32 {
    let b = bitcast<i32>(f);
    return select(b, b ^ 0x7fffffff, b < 0);
}

var<workgroup> lo: array<f32, 64>;
var<workgroup> hi: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (wg.x + wg.y * params.grid_x) * 64u + t;
    var s_lo = 3.0e38;
    var s_hi = -3.0e38;
    if (i < params.rows) {
        let s = scores[i];
        s_lo = s;
        s_hi = s;
    }
    lo[t] = s_lo;
    hi[t] = s_hi;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k >>= 1u) {
        if (t < k) {
            lo[t] = min(lo[t], lo[t + k]);
            hi[t] = max(hi[t], hi[t + k]);
        }
        workgroupBarrier();
    }
    if (t == 0u && lo[0] <= hi[0]) {
        atomicMin(&bounds[0], order_key(lo[0]));
        atomicMax(&bounds[1], order_key(hi[0]));
    }
}
