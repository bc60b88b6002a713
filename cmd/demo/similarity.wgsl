// similarity.wgsl: the cosine similarity of every row to the frame's query,
// for colouring, and the bounds of those scores.
//
// Bindings, group 0:
//   0  rows    storage, read        array<vec4<f32>>      rows × dim4 words: unit vectors, zero padded
//   1  query   storage, read        array<vec4<f32>>      dim4 words: the unit query, zero padded
//   2  scores  storage, read_write  array<f32>            one score per row (also a vertex buffer)
//   3  bounds   storage, read_write  array<atomic<i32>, 2> lowest and highest score as order keys;
//                                                         the host resets them to (MAX, MIN) each frame
//   4  params  uniform              Params
//
// Dispatch (grid_x, grid_y) workgroups of 64 covering the rows.

struct Params {
    rows: u32,
    dim4: u32,
    grid_x: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<storage, read_write> bounds: array<atomic<i32>, 2>;
@group(0) @binding(4) var<uniform> params: Params;

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
        var acc = vec4<f32>(0.0);
        let base = i * params.dim4;
        for (var j = 0u; j < params.dim4; j++) {
            acc += rows[base + j] * query[j];
        }
        let s = dot(acc, vec4<f32>(1.0));
        scores[i] = s;
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
