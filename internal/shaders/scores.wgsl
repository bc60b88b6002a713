// scores.wgsl: similarity scores of every stored row against a tile of
// queries, written where the select shader finds them.
//
// Bindings (group 0):
//   0  rows    array<vec4<f32>>  storage, read        one chunk of the slab, DIM4 vec4 per row
//   1  query   array<vec4<f32>>  storage, read        nq queries, DIM4 vec4 each (zero padded)
//   2  scores  array<f32>        storage, read_write  score of query j for global row r at j*n_total + r
//   3  params  Params            uniform              this chunk's rows and place, grid width
//
// A team of TEAM invocations shares one row: lane i reads vec4 number i,
// i+TEAM, ..., so consecutive lanes read consecutive 16-byte words and the
// loads coalesce (a staged slice is a multiple of TEAM words, so lane i
// sums the same words in the same order either way). ROWS teams make one workgroup. Each loaded vec4 of a row is
// used for QT queries before the next is read, so a batch reads the slab
// once per QT queries rather than once per query; a batch layout stages
// the tile's queries in workgroup memory, a slice of the dimension at a
// time. The team's partial sums
// are reduced with subgroup shuffles where the device has the subgroup
// feature (the variant is chosen at device creation), otherwise by a tree in
// workgroup memory, both in common.wgsl's team_sum order. The grid is 2-D over rows because one
// dimension holds at most 65,535 workgroups on many adapters (params.groups_x
// is its width); the z dimension walks the tiles of QT queries.
//
// The score is the dot product (cosine over rows and query normalised on
// the host) or, with L2, the squared Euclidean distance. Padding is zero in
// both rows and queries, so it adds nothing to either.

const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
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
{{if .Subgroups}}
// Set by any invocation that finds the subgroup layout unusable for shuffles.
var<workgroup> layout_bad: u32;
{{end}}
{{if .Slice}}
const SLICE: u32 = {{.Slice}}u;
var<workgroup> qtile: array<vec4<f32>, {{.QTile}}>;
{{end}}

@compute @workgroup_size({{.Workgroup}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32{{if .Subgroups}},
        @builtin(subgroup_size) sg_size: u32{{end}}) {
    let group = wg.y * params.groups_x + wg.x;
    let lane = li % TEAM;
    let row = group * ROWS + li / TEAM;
    let q0 = wg.z * QT;

    // Every accumulator starts from zero read from the uniform, as
    // gemm.wgsl's do: from a constant zero (an array's implicit
    // initialiser included), a compiler may fold the first fma into a
    // product and contract it with the lane sum into an fma of its own
    // (Vulkan allows both), and then a row of one fma a lane (dimension 7)
    // would score other bits here than in gemm.wgsl, whose self-test
    // compares them bit for bit.
    let zero = vec4<f32>(f32(params._pad0));
    var acc: array<vec4<f32>, QT>;
    for (var j = 0u; j < QT; j++) {
        acc[j] = zero;
    }
{{if .Slice}}
    // Batch variant: the tile's queries are staged in workgroup memory SLICE
    // vec4 at a time, loaded once per workgroup instead of once per team,
    // and every row vec4 loaded from the slab meets all QT of them there.
    for (var s0 = 0u; s0 < DIM4; s0 += SLICE) {
        for (var t = li; t < QT * SLICE; t += WG) {
            let j = t / SLICE;
            let i = s0 + t % SLICE;
            var v = vec4<f32>(0.0);
            if (i < DIM4) {
                v = query[min(q0 + j, params.nq - 1u) * DIM4 + i];
            }
            qtile[t] = v;
        }
        workgroupBarrier();
        if (row < params.rows) {
            let base = row * DIM4 + s0;
            let end = min(SLICE, DIM4 - s0);
            for (var i = lane; i < end; i += TEAM) {
                let x = rows[base + i];
                for (var j = 0u; j < QT; j++) {
                    let q = qtile[j * SLICE + i];
                    if (!L2) {
                        acc[j] = fma(x, q, acc[j]);
                    } else {
                        let d = x - q;
                        acc[j] = fma(d, d, acc[j]);
                    }
                }
            }
        }
        workgroupBarrier();
    }
{{else}}
    if (row < params.rows) {
        let base = row * DIM4;
        for (var i = lane; i < DIM4; i += TEAM) {
            let x = rows[base + i];
            for (var j = 0u; j < QT; j++) {
                let q = query[min(q0 + j, params.nq - 1u) * DIM4 + i];
                if (!L2) {
                    acc[j] = fma(x, q, acc[j]);
                } else {
                    let d = x - q;
                    acc[j] = fma(d, d, acc[j]);
                }
            }
        }
    }
{{end}}
{{if .Subgroups}}
    // Subgroup variant: lanes of a team that share a subgroup add up with
    // shuffles (no barrier); only when a team spans several subgroups do
    // their sums meet in workgroup memory, after one barrier. The shuffles
    // (masks 1, 2, ..., w/2) and the sums of the runs (a pairwise tree in
    // lane 0) add exactly team_sum's pairs in its order, so a score is the
    // same bits whatever the subgroup size w. Neither WGSL nor Vulkan
    // promises how invocations map to subgroups, so the shuffles are
    // trusted only after each invocation has checked, by shuffling its
    // own index, that its xor partners are exactly the invocations li ^ m
    // of the same aligned run of w lanes (so a sum never mixes two rows and
    // never misses a lane). If any invocation of the workgroup finds
    // otherwise, the whole workgroup takes team_sum's tree instead, which
    // gives the same bits.
    let w = min(TEAM, sg_size);
    var ok = w > 0u && (w & (w - 1u)) == 0u;
    for (var m = 1u; m < w; m = m * 2u) {
        // Shuffled by every invocation, outside the &&: a shuffle must be
        // called in subgroup-uniform control flow (Tint's uniformity
        // analysis rejects it behind a short-circuit; naga accepts both).
        let partner = subgroupShuffleXor(li, m);
        ok = ok && partner == (li ^ m);
    }
    if (!ok) {
        layout_bad = 1u;
    }
    let use_tree = workgroupUniformLoad(&layout_bad);
    if (use_tree == 0u) {
        for (var j = 0u; j < QT; j++) {
            let a = acc[j];
            var v = (a.x + a.y) + (a.z + a.w);
            for (var m = 1u; m < w; m = m * 2u) {
                v += subgroupShuffleXor(v, m);
            }
            if (lane % w == 0u) {
                partial[j * WG + li / w] = v;
            }
        }
        workgroupBarrier();
        if (lane == 0u) {
            // This team's runs' sums are partial[first ..< first + parts]:
            // the tree's upper levels, in place.
            let parts = TEAM / w;
            let first = li / w;
            for (var s = 1u; s < parts; s = s * 2u) {
                for (var p = 0u; p + s < parts; p += 2u * s) {
                    for (var j = 0u; j < QT; j++) {
                        partial[j * WG + first + p] = partial[j * WG + first + p] + partial[j * WG + first + p + s];
                    }
                }
            }
            for (var j = 0u; j < QT; j++) {
                if (row < params.rows && q0 + j < params.nq) {
                    scores[(q0 + j) * params.n_total + params.base + row] = partial[j * WG + first];
                }
            }
        }
        return;
    }
{{end}}
    for (var j = 0u; j < QT; j++) {
        let a = acc[j];
        partial[j * WG + li] = (a.x + a.y) + (a.z + a.w);
    }
    team_sum(li, QT);

    if (lane == 0u && row < params.rows) {
        for (var j = 0u; j < QT; j++) {
            if (q0 + j < params.nq) {
                scores[(q0 + j) * params.n_total + params.base + row] = partial[j * WG + li];
            }
        }
    }
}
