// topk.wgsl: exact top-k in two dispatches, the scores never leaving the
// chip. `scan` scores rows like scores.wgsl and keeps each workgroup's own
// k best per query in workgroup memory; `merge` (one workgroup per query)
// merges every workgroup's candidates into the exact k best, best first.
//
// Ordering: a candidate is (score bits, row); it ranks by order_key(score)
// (the rule of select.wgsl and the fallback: best highest, -0 == +0, NaN
// worst) and, on equal keys, by lower row. No two rows are equal, so the
// order is total. (The engine turns ties by row into ties by lower ID.)
// NONE (row 0xffffffff) marks an empty slot and ranks below every row
// (rows are below 2^32 - 1).
//
// Keeping k in workgroup memory: each query of the tile has CAP slots (a
// power of two, CAP >= k + STEP, STEP the candidates a step offers). A row enters when it beats the query's
// threshold, the k-th best kept so far (NONE until k are kept), appended at
// an atomic count. Before a step could overflow the slots, the lists are
// sorted (bitonic, in workgroup memory), cut to k and the threshold set to
// the k-th. After the last step the lists are sorted once more and their
// first k written out.
//
{{- if .Merge}}
// Bindings (group 0) of this merge variant:
//   0  cands   array<vec2<u32>>  storage, read        query q's candidate lists at q*lists*k .., k each, best first
//   1  out     array<vec2<u32>>  storage, read_write  query q's hits at q*k ..: (score bits, row), best first
//   2  mp      MergeParams       uniform
// Dispatch: (queries, 1, 1).
{{- else}}
// Bindings (group 0) of this scan variant:
//   0  rows    array<vec4<f32>>  storage, read        one chunk of the slab, DIM4 vec4 per row
//   1  query   array<vec4<f32>>  storage, read        nq queries, DIM4 vec4 each
//   2  cands   array<vec2<u32>>  storage, read_write  list (list_base + workgroup x) of query q at (q*lists + list)*k ..
//   3  params  Params            uniform
//   4  allow   array<u32>        storage, read        bitmap over global rows, used when bit 0 of params.masked
//                                                     is set; masked >> 1, when not 0, is the word where the
//                                                     resident tombstones start (a set bit: row deleted)
// Dispatch: (G, 1, tiles of QT queries); workgroup x strides over the
// chunk's steps of STEP rows. A team of TEAM invocations shares a row and
// sums its part as scores.wgsl does, by common.wgsl's team_sum (the same
// bits as every other path's score);
// each team scores RM rows a step, so one tree (its barriers) serves RM
// rows.
{{- end}}

{{template "metric" .}}
const QT: u32 = {{.QT}}u;
const WG: u32 = {{.Workgroup}}u;
const CAP: u32 = {{.Cap}}u;
const NONE: u32 = 0xffffffffu;
{{- if .Merge}}
const STEP: u32 = WG; // candidates offered per step
{{- else}}
const DIM4: u32 = {{.Dim4}}u;
const TEAM: u32 = {{.Team}}u;
const ROWS: u32 = {{.Rows}}u;
const RM: u32 = {{.RM}}u;       // rows each team scores per step
const STEP: u32 = ROWS * RM;    // rows per step: candidates offered per query
{{- end}}

var<workgroup> keep: array<vec2<u32>, {{.Keep}}>;
var<workgroup> cnt: array<atomic<u32>, QT>;
var<workgroup> thr: array<vec2<u32>, QT>;
var<workgroup> full: u32;

{{template "order_key" .}}

fn key_of(c: vec2<u32>) -> u32 {
    if (c.y == NONE) {
        return 0u;
    }
    return order_key(bitcast<f32>(c.x));
}

// better reports whether candidate a ranks before b.
fn better(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ka = key_of(a);
    let kb = key_of(b);
    return ka > kb || (ka == kb && a.y < b.y);
}

// sort_lists sorts each query's CAP slots best first (bitonic network; the
// empty slots, NONE, sink to the end). Called in uniform control flow.
fn sort_lists(li: u32) {
    for (var size = 2u; size <= CAP; size = size * 2u) {
        for (var stride = size / 2u; stride > 0u; stride = stride / 2u) {
            for (var t = li; t < QT * CAP / 2u; t += WG) {
                let l = t / (CAP / 2u);
                let u = t % (CAP / 2u);
                let i = l * CAP + (u / stride) * 2u * stride + (u % stride);
                let j = i + stride;
                let a = keep[i];
                let b = keep[j];
                // Blocks whose bit `size` is clear end best first, the
                // others worst first, so each pair of blocks is bitonic.
                let best_first = ((i % CAP) & size) == 0u;
                if (best_first == better(b, a)) {
                    keep[i] = b;
                    keep[j] = a;
                }
            }
            workgroupBarrier();
        }
    }
}

// cut sorts the lists, keeps each one's k best and makes the k-th the
// threshold a new candidate must beat.
fn cut(li: u32, k: u32) {
    sort_lists(li);
    if (li < QT) {
        let n = min(atomicLoad(&cnt[li]), k);
        atomicStore(&cnt[li], n);
        if (n == k) {
            thr[li] = keep[li * CAP + k - 1u];
        }
    }
    for (var t = li; t < QT * CAP; t += WG) {
        if (t % CAP >= k) {
            keep[t] = vec2<u32>(NONE, NONE);
        }
    }
    workgroupBarrier();
}

// offer appends candidate c to query j's list if it beats the threshold.
fn offer(j: u32, c: vec2<u32>) {
    if (better(c, thr[j])) {
        let slot = atomicAdd(&cnt[j], 1u);
        keep[j * CAP + slot] = c;
    }
}

// settle cuts the lists when the next step could overflow one of them.
fn settle(li: u32, k: u32) {
    workgroupBarrier();
    if (li == 0u) {
        var f = 0u;
        for (var j = 0u; j < QT; j++) {
            if (atomicLoad(&cnt[j]) + STEP > CAP) {
                f = 1u;
            }
        }
        full = f;
    }
    if (workgroupUniformLoad(&full) != 0u) {
        cut(li, k);
    }
}

fn init_lists(li: u32) {
    for (var t = li; t < QT * CAP; t += WG) {
        keep[t] = vec2<u32>(NONE, NONE);
    }
    if (li < QT) {
        atomicStore(&cnt[li], 0u);
        thr[li] = vec2<u32>(NONE, NONE);
    }
    workgroupBarrier();
}
{{if .Merge}}
struct MergeParams {
    k: u32,      // hits per query
    lists: u32,  // candidate lists per query
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> cands: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec2<u32>>;
@group(0) @binding(2) var<uniform> mp: MergeParams;

@compute @workgroup_size(WG)
fn merge(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let q = wg.x;
    let k = mp.k;
    let total = mp.lists * k;
    init_lists(li);
    for (var b = 0u; b < total; b += WG) {
        let i = b + li;
        if (i < total) {
            let c = cands[q * total + i];
            if (c.y != NONE) {
                offer(0u, c);
            }
        }
        settle(li, k);
    }
    cut(li, k);
    for (var i = li; i < k; i += WG) {
        out[q * k + i] = keep[i];
    }
}
{{else}}
{{template "params" .}}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> query: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> cands: array<vec2<u32>>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> allow: array<u32>;

var<workgroup> partial: array<f32, {{.Partial}}>;

{{template "team_sum" .}}

@compute @workgroup_size(WG)
fn scan(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let lane = li % TEAM;
    let r = li / TEAM;
    let q0 = wg.z * QT;
    let k = params.k;
    // Zero read from the uniform: the accumulators start from it, never
    // from a constant a compiler could fold (scores.wgsl says why).
    let zero = vec4<f32>(f32(params._pad0));
    init_lists(li);
    let steps = (params.rows + STEP - 1u) / STEP;
    for (var g = wg.x; g < steps; g += nwg.x) {
        // One accumulator array per row of the step, unrolled here so no
        // array is indexed by a row number the compiler cannot see (which
        // would put it in memory); each query vec4 loaded serves every
        // row. Zeroed explicitly every step: a declaration without
        // initializer inside a loop is not re-zeroed on every pass by every
        // compiler (naga hoists it to the function's entry). Rows past the
        // chunk read its last row and are skipped when offered.
{{- range .Ms}}
        var acc{{.}}: array<vec4<f32>, QT>;
        let base{{.}} = min((g * RM + {{.}}u) * ROWS + r, params.rows - 1u) * DIM4;
{{- end}}
        for (var j = 0u; j < QT; j++) {
{{- range .Ms}}
            acc{{.}}[j] = zero;
{{- end}}
        }
        for (var i = lane; i < DIM4; i += TEAM) {
{{- range .Ms}}
            let x{{.}} = rows[base{{.}} + i];
{{- end}}
            for (var j = 0u; j < QT; j++) {
                let q = query[min(q0 + j, params.nq - 1u) * DIM4 + i];
                if (!L2) {
{{- range .Ms}}
                    acc{{.}}[j] = fma(x{{.}}, q, acc{{.}}[j]);
{{- end}}
                } else {
{{- range .Ms}}
                    let d{{.}} = x{{.}} - q;
                    acc{{.}}[j] = fma(d{{.}}, d{{.}}, acc{{.}}[j]);
{{- end}}
                }
            }
        }
        for (var j = 0u; j < QT; j++) {
{{- range .Ms}}
            let v{{.}} = acc{{.}}[j];
            partial[({{.}}u * QT + j) * WG + li] = (v{{.}}.x + v{{.}}.y) + (v{{.}}.z + v{{.}}.w);
{{- end}}
        }
        team_sum(li, QT * RM);
        if (lane == 0u) {
            for (var m = 0u; m < RM; m++) {
                let row = (g * RM + m) * ROWS + r;
                let global = params.base + row;
                let bit = 1u << (global & 31u);
                let dead_at = params.masked >> 1u;
                let skip = row >= params.rows ||
                    ((params.masked & 1u) != 0u && (allow[global >> 5u] & bit) == 0u) ||
                    (dead_at != 0u && (allow[dead_at + (global >> 5u)] & bit) != 0u);
                if (!skip) {
                    for (var j = 0u; j < QT; j++) {
                        if (q0 + j < params.nq) {
                            offer(j, vec2<u32>(bitcast<u32>(partial[(m * QT + j) * WG + li]), global));
                        }
                    }
                }
            }
        }
        settle(li, k);
    }
    cut(li, k);
    let list = params.list_base + wg.x;
    for (var t = li; t < QT * k; t += WG) {
        let j = t / k;
        let i = t % k;
        if (q0 + j < params.nq) {
            cands[((q0 + j) * params.lists + list) * k + i] = keep[j * CAP + i];
        }
    }
}
{{end}}
