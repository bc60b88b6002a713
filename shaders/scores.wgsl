// scores.wgsl: one similarity score per stored row against one query.
//
// Bindings (group 0):
//   0  rows    array<vec4<f32>>  storage, read        one chunk of the slab, DIM4 vec4 per row
//   1  query   array<vec4<f32>>  storage, read        the query, DIM4 vec4 (zero padded)
//   2  scores  array<f32>        storage, read_write  one score per row of the chunk
//   3  params  Params            uniform              rows in the chunk, workgroups per grid row
//
// A team of TEAM invocations shares one row: lane i reads vec4 number i,
// i+TEAM, ..., so consecutive lanes read consecutive 16-byte words and the
// loads coalesce. ROWS teams make one workgroup. The team's partial sums are
// reduced in workgroup memory. The grid is 2-D because one dimension holds at
// most 65,535 workgroups on many adapters; params.groups_x is its width.
//
// METRIC 0 is the dot product (cosine over rows and query normalised on the
// host); METRIC 1 is the squared Euclidean distance. Padding is zero in both
// rows and query, so it adds nothing to either.

const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
const ROWS: u32 = {{.Rows}}u;
const METRIC: u32 = {{.Metric}}u;

struct Params {
    rows: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> partial: array<f32, {{.Workgroup}}>;

@compute @workgroup_size({{.Workgroup}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let group = wg.y * params.groups_x + wg.x;
    let lane = li % TEAM;
    let row = group * ROWS + li / TEAM;

    var acc = vec4<f32>(0.0);
    if (row < params.rows) {
        let base = row * DIM4;
        for (var i = lane; i < DIM4; i += TEAM) {
            let x = rows[base + i];
            let q = query[i];
            if (METRIC == 0u) {
                acc = fma(x, q, acc);
            } else {
                let d = x - q;
                acc = fma(d, d, acc);
            }
        }
    }
    partial[li] = (acc.x + acc.y) + (acc.z + acc.w);
    workgroupBarrier();

    for (var s = TEAM / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            partial[li] = partial[li] + partial[li + s];
        }
        workgroupBarrier();
    }

    if (lane == 0u && row < params.rows) {
        scores[row] = partial[li];
    }
}
