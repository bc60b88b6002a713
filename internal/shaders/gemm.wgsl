// gemm.wgsl: similarity scores of every stored row against a batch of
// queries, shaped like a matrix product: each invocation keeps a register
// tile of RM rows × QM queries, so a row word loaded once meets QM queries
// and a query word loaded once meets RM rows, and a workgroup reads each of
// its rows once for QT = TQ × QM queries (scores.wgsl reads them once per
// 8). It writes what scores.wgsl writes, where it writes it, bit for bit.
//
// Bindings (group 0): scores.wgsl's.
//   0  rows    array<vec4<f32>>  storage, read        one chunk of the slab, DIM4 vec4 per row
//   1  query   array<vec4<f32>>  storage, read        nq queries, DIM4 vec4 each (zero padded)
//   2  scores  array<f32>        storage, read_write  score of query j for global row r at j*n_total + r
//   3  params  Params            uniform              this chunk's rows and place, grid width
//
// The summation order is the one of every path (common.wgsl's team_sum):
// a team of TEAM invocations shares its rows, lane i summing vec4 words i,
// i + TEAM, ... of a row against the same words of a query by fma, in that
// order, then (x + y) + (z + w), and the team's TEAM partial sums meet in
// team_sum's pairwise tree. Here a team holds RM rows and QM queries at
// once: TR × TQ teams make a workgroup, team t taking rows
// group·ROWS + (t mod TR)·RM + m and queries z·QT + (t div TR)·QM + j.
// The RM × QM accumulators are written out, Pass of them at a time, and
// summed by team_sum, so the workgroup memory holds Pass × WG floats.
// The loops over the tile are unrolled in the source (each accumulator a
// named variable), so no compiler has to keep an indexed array in
// registers.

const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
const RM: u32 = {{.RM}}u;
const QM: u32 = {{.QM}}u;
const TR: u32 = {{.TR}}u;
const ROWS: u32 = {{.Rows}}u;
const QT: u32 = {{.QT}}u;
const WG: u32 = {{.Workgroup}}u;
{{template "metric" .}}

{{template "params" .}}

{{template "team_sum" .}}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> partial: array<f32, {{.Partial}}>;

@compute @workgroup_size({{.Workgroup}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let group = wg.y * params.groups_x + wg.x;
    // A workgroup wholly past the chunk's end (the grid's last row may
    // hold a few) does nothing. The test is the same for the whole
    // workgroup, so no barrier below is left to part of it.
    if (group * ROWS >= params.rows) {
        return;
    }
    let lane = li % TEAM;
    let team = li / TEAM;
    let row0 = group * ROWS + (team % TR) * RM;
    let qa = wg.z * QT + (team / TR) * QM;
    // A team whose rows all lie past the chunk's end, or whose queries
    // past the batch's, loads and sums nothing (it writes nothing either).
    let end = select(0u, DIM4, row0 < params.rows && qa < params.nq);
    // Rows and queries past the ends are read clamped (and never written).
    let last = max(params.rows, 1u) - 1u;
{{- range .Ms}}
    let rb{{.}} = min(row0 + {{.}}u, last) * DIM4;
{{- end}}
{{- range .Js}}
    let qb{{.}} = min(qa + {{.}}u, params.nq - 1u) * DIM4;
{{- end}}
    // Zero, but read from the uniform: a constant zero lets a compiler
    // fold the first fma into a product and contract it with the lane sum
    // below into an fma of its own (lavapipe does, for rows of one vec4),
    // which scores.wgsl, whose accumulators sit in an array, never gets.
    let zero = vec4<f32>(f32(params._pad0));
{{- range .Accs}}
    var a{{.M}}_{{.J}} = zero;
{{- end}}
    for (var i = lane; i < end; i += TEAM) {
{{- range .Ms}}
        let x{{.}} = rows[rb{{.}} + i];
{{- end}}
{{- range .Js}}
        let y{{.}} = query[qb{{.}} + i];
{{- end}}
        if (!L2) {
{{- range .Accs}}
            a{{.M}}_{{.J}} = fma(x{{.M}}, y{{.J}}, a{{.M}}_{{.J}});
{{- end}}
        } else {
{{- range .Accs}}
            let d{{.M}}_{{.J}} = x{{.M}} - y{{.J}};
            a{{.M}}_{{.J}} = fma(d{{.M}}_{{.J}}, d{{.M}}_{{.J}}, a{{.M}}_{{.J}});
{{- end}}
        }
    }
{{- range .Rounds}}
    // Accumulators {{.First}} to {{.Last}}: into workgroup memory, through
    // the tree, out from each team's lane 0.
{{- range .Accs}}
    partial[{{.Slot}}u * WG + li] = (a{{.M}}_{{.J}}.x + a{{.M}}_{{.J}}.y) + (a{{.M}}_{{.J}}.z + a{{.M}}_{{.J}}.w);
{{- end}}
    team_sum(li, {{len .Accs}}u);
    if (lane == 0u) {
{{- range .Accs}}
        if (row0 + {{.M}}u < params.rows && qa + {{.J}}u < params.nq) {
            scores[(qa + {{.J}}u) * params.n_total + params.base + row0 + {{.M}}u] = partial[{{.Slot}}u * WG + li];
        }
{{- end}}
    }
    // Lane 0 has read its sums before the next round overwrites them.
    workgroupBarrier();
{{- end}}
}
