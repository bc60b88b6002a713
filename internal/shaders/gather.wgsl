// gather.wgsl: the scores of a listed subset of a chunk's rows against one
// query each pass: a filtered search that admits few rows reads only them.
//
// Bindings (group 0):
//   0  rows    array<vec4<f32>>  storage, read        one chunk of the slab, DIM4 vec4 per row
//   1  query   array<vec4<f32>>  storage, read        nq queries, DIM4 vec4 each (zero padded)
//   2  scores  array<f32>        storage, read_write  query j's score of listed row i at j*n_total + base + i
//   3  params  Params            uniform              rows: this chunk's listed rows; base: their first
//                                                     place among every chunk's; list_base: the first of
//                                                     them in list; n_total: listed rows in all
//   4  list    array<u32>        storage, read        the listed rows, chunk-local, every chunk's in turn
//
// A team of TEAM invocations shares one listed row exactly as scores.wgsl
// shares a row (lane i sums vec4 words i, i+TEAM, ... by fma, then
// (x + y) + (z + w), then common.wgsl's team_sum), so each score is the
// bits every other path gives that row. ROWS teams make a workgroup; the
// grid is 2-D over listed rows (params.groups_x wide) and its z dimension
// walks the queries.

const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
const ROWS: u32 = {{.Rows}}u;
const WG: u32 = {{.Workgroup}}u;
{{template "metric" .}}

{{template "params" .}}

{{template "team_sum" .}}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> list: array<u32>;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size({{.Workgroup}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let group = wg.y * params.groups_x + wg.x;
    let lane = li % TEAM;
    let i = group * ROWS + li / TEAM;
    let q = wg.z;
    // The accumulator starts from zero read from the uniform, never from
    // a constant a compiler could fold (scores.wgsl says why): a gathered
    // row scores the bits the scan gives it.
    let zero = vec4<f32>(f32(params._pad0));
    var acc = zero;
    if (i < params.rows && q < params.nq) {
        let base = list[params.list_base + i] * DIM4;
        for (var v = lane; v < DIM4; v += TEAM) {
            let x = rows[base + v];
            let y = query[q * DIM4 + v];
            if (!L2) {
                acc = fma(x, y, acc);
            } else {
                let d = x - y;
                acc = fma(d, d, acc);
            }
        }
    }
    partial[li] = (acc.x + acc.y) + (acc.z + acc.w);
    team_sum(li, 1u);
    if (lane == 0u && i < params.rows && q < params.nq) {
        scores[q * params.n_total + params.base + i] = partial[li];
    }
}
