// quant.wgsl: raw dot sums of every compressed row against a tile of
// queries, for an index that holds its rows as float16 or int8 codes
// (exact.Compressed). The host turns each sum into a certain interval
// for the row's float32 score (internal/exact/quant_bounds.go) and rescores in
// float32 only the rows that can reach the k-th best, so the shader need
// not know the metric, the scales or the error bounds: it sums.
//
// Bindings (group 0), scores.wgsl's layout with other element types:
//   0  rows    array<vec4<u32>>  storage, read        one chunk of codes, DIM4 words of 4 u32 per row
//   1  query   array<vec4<u32>>  storage, read        nq queries: F16, the float32 query's bits, 2·DIM4 words
//                                                     each; Int8, its int8 codes packed 4 a u32, DIM4 words each
//   2  scores  array<u32>        storage, read_write  sum of query j for global row r at j*n_total + r:
//                                                     F16 a float32's bits, Int8 an i32's
//   3  params  Params            uniform              this chunk's rows and place, grid width
//
// F16: each u32 holds two halves (component 2i in its low
// bits), widened by unpack2x16float and summed in float32 FMAs; the host's
// bound holds for any order of them. Int8: each u32 holds four
// codes stored offset by 128 (code c as the byte c+128, the fallback's
// layout for VNNI); xor 0x80 turns each byte back into c as a two's
// complement byte, and dot4I8Packed multiplies them with the query's codes
// exactly. The i32 sum is exact: |Σ| ≤ 65,536 × 127 × 127 < 2^31.
//
// A team of TEAM invocations shares one row as in scores.wgsl (lane i reads
// word i, i+TEAM, ...), ROWS teams make a workgroup, the team's sums meet
// in workgroup memory by common.wgsl's team_sum, and the z dimension walks
// tiles of QT queries.

const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
const ROWS: u32 = {{.Rows}}u;
const QT: u32 = {{.QT}}u;
const WG: u32 = {{.Workgroup}}u;

{{template "params" .}}

@group(0) @binding(0) var<storage, read> rows: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> scores: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;
{{if .Int8}}
var<workgroup> partial: array<i32, {{.Partial}}>;
{{else}}
var<workgroup> partial: array<f32, {{.Partial}}>;
{{end}}
{{template "team_sum" .}}

@compute @workgroup_size({{.Workgroup}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let group = wg.y * params.groups_x + wg.x;
    let lane = li % TEAM;
    let row = group * ROWS + li / TEAM;
    let q0 = wg.z * QT;
{{if .Int8}}
    var acc: array<i32, QT>;
    if (row < params.rows) {
        let base = row * DIM4;
        for (var i = lane; i < DIM4; i += TEAM) {
            let x = rows[base + i] ^ vec4<u32>(0x80808080u);
            for (var j = 0u; j < QT; j++) {
                let q = query[min(q0 + j, params.nq - 1u) * DIM4 + i];
                acc[j] += (dot4I8Packed(x.x, q.x) + dot4I8Packed(x.y, q.y)) +
                          (dot4I8Packed(x.z, q.z) + dot4I8Packed(x.w, q.w));
            }
        }
    }
    for (var j = 0u; j < QT; j++) {
        partial[j * WG + li] = acc[j];
    }
{{else}}
    var acc: array<vec4<f32>, QT>;
    if (row < params.rows) {
        let base = row * DIM4;
        for (var i = lane; i < DIM4; i += TEAM) {
            let w = rows[base + i];
            let x0 = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
            let x1 = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
            for (var j = 0u; j < QT; j++) {
                let qi = min(q0 + j, params.nq - 1u) * DIM4 * 2u + 2u * i;
                acc[j] = fma(x0, bitcast<vec4<f32>>(query[qi]), acc[j]);
                acc[j] = fma(x1, bitcast<vec4<f32>>(query[qi + 1u]), acc[j]);
            }
        }
    }
    for (var j = 0u; j < QT; j++) {
        let a = acc[j];
        partial[j * WG + li] = (a.x + a.y) + (a.z + a.w);
    }
{{end}}
    team_sum(li, QT);
    if (lane == 0u && row < params.rows) {
        for (var j = 0u; j < QT; j++) {
            if (q0 + j < params.nq) {
                scores[(q0 + j) * params.n_total + params.base + row] = bitcast<u32>(partial[j * WG + li]);
            }
        }
    }
}
