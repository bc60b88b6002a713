{{- /*
common.wgsl: the fragments several shaders share, each written once here.
shaders.go parses this file into every shader's template, and a shader
places a fragment with {{template "name" .}}. WGSL has no include, so this
is how one rule stays one rule: the order of scores (select.wgsl and
topk.wgsl), the per-chunk Params uniform (scores.wgsl, quant.wgsl and
topk.wgsl's scan) and the metric constant they branch on.
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
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
{{- end}}
