{{- /*
common.wgsl: the fragments several shaders share, each written once here.
shaders.go parses this file into every shader's template, and a shader
places a fragment with {{template "name" .}}. WGSL has no include, so this
is how one rule stays one rule: the order of scores (select.wgsl and
topk.wgsl), the order a team's partial sums are added in (scores.wgsl,
topk.wgsl's scan, quant.wgsl), the per-chunk Params uniform (scores.wgsl,
quant.wgsl and topk.wgsl's scan) and the metric constant they branch on.
*/ -}}

{{- define "metric"}}
// L2 selects the squared Euclidean distance (lower is better); otherwise
// the score is the dot product (cosine is the dot product of rows and a
// query normalised on the host).
const L2: bool = {{.L2}};
{{- end}}

{{- define "order_key"}}
// order_key is the one ordering of scores of every path (the fallback's
// comparisons, internal/topk, agree with it): best scores get the largest
// keys, -0 and +0 are one value, and NaN (a dot product of huge finite
// vectors can overflow to +Inf + -Inf) is worse than every number under
// both metrics.
fn order_key(s: f32) -> u32 {
    var b = bitcast<u32>(s);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return 0u;
    }
    if (b == 0x80000000u) {
        b = 0u;
    }
    var k: u32;
    if ((b & 0x80000000u) != 0u) {
        k = ~b;
    } else {
        k = b | 0x80000000u;
    }
    if (L2) {
        k = ~k;
    }
    return k;
}
{{- end}}

{{- define "params"}}
// Params is the per-chunk uniform, shaders.Params on the host (48 bytes):
// scores.wgsl and quant.wgsl read rows to nq, topk.wgsl's scan all but
// groups_x and n_total.
struct Params {
    rows: u32,      // rows in this chunk
    groups_x: u32,  // grid width in workgroups
    base: u32,      // global index of the chunk's first row
    n_total: u32,   // rows in the whole index: the stride between queries' scores
    nq: u32,        // queries in this submission
    k: u32,         // hits per query (the fused scan)
    masked: u32,    // bit 0: only rows set in allow take part; >> 1: the tombstones' first word (0: none)
    list_base: u32, // this chunk's first candidate list (the fused scan)
    lists: u32,     // candidate lists per query, over every chunk (the fused scan)
    _pad0: u32,     // 0 (every float32 accumulator starts from it: a zero no compiler can fold)
    _pad1: u32,
    _pad2: u32,
}
{{- end}}

{{- define "team_sum"}}
// team_sum adds up each team's TEAM partial sums, partial[a * WG + li] for
// accumulators a < n, into the team's lane 0, in the one summation order
// of every path that scores a row (scores.wgsl's tree and shuffles, both
// layouts, topk.wgsl's scan, quant.wgsl): the pairwise tree over adjacent
// lanes, (p0 + p1) + (p2 + p3) and so on up, so that a row's score is the
// same bits whichever path, batch shape or subgroup size computed it. (A
// lane's own value is the same everywhere too: lane l sums vec4 words l,
// l + TEAM, ... in that order by fma, then (x + y) + (z + w).) A subgroup
// of w lanes computes the first log2(w) levels by xor shuffles with masks
// 1, 2, ..., w/2, which pair exactly these lanes; the levels above them
// are this tree's. Called in uniform control flow once the partial sums
// are written; lane 0 of each team holds the totals when it returns.
fn team_sum(li: u32, n: u32) {
    workgroupBarrier();
    let lane = li % TEAM;
    let first = li - lane;
    for (var s = 1u; s < TEAM; s = s * 2u) {
        let off = lane * 2u * s;
        if (off < TEAM) {
            for (var a = 0u; a < n; a++) {
                partial[a * WG + first + off] = partial[a * WG + first + off] + partial[a * WG + first + off + s];
            }
        }
        workgroupBarrier();
    }
}
{{- end}}
