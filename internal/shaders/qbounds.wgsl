// qbounds.wgsl: device-side candidate selection for a compressed search
// (issue 24), so that only candidates, not every raw sum, are read back.
//
// quant.wgsl has written every raw sum (query j, row r at j*n + r). Per
// (query, row) this shader computes, in float32, an interval [lo', hi'] for
// the row's float32 score key (larger is better; L2's key is the negated
// squared distance) that CONTAINS the host's interval [lo, hi] of
// internal/exact/quant_bounds.go (keyBounds, with forDevice's widening):
// lo' ≤ lo and hi' ≥ hi whatever the rounding of the device's float32
// arithmetic. Then τ' = the k-th best lo' among the allowed rows (select.wgsl's
// radix select run over the lo' keys) is at most the host's τ, and every
// allowed row with hi' ≥ τ' is appended to the query's candidate list:
// every row of the host's top k by lo and every row the host would rescore
// (hi ≥ τ) is a candidate, since hi' ≥ hi ≥ τ ≥ τ'.
//
// Why lo' ≤ lo and hi' ≥ hi. The host sends per-query coefficients rounded
// outward to float32 (exact.DeviceBoundCoefs). The device's estimate and
// half-width differ from the host's float64 ones only by rounding: each
// float32 operation in the normal range errs by at most 2^-24 relative,
// sqrt by 2 ULP and a subnormal result may be flushed to zero (an absolute
// error below 2^-126 a step). Every quantity below is a sum of a few dozen
// such steps over non-negative terms whose sum is `mag`, so widening the
// half-width by MARGIN·mag (2^-16, far above ~2^-19 of accumulated relative
// error) plus FLOOR (2^-120, a normal float above the flushed
// absolutes: at most 2^-126 a step, a few dozen steps) covers them; the square roots are widened by 2^-18 outward.
// A row whose magnitudes the host refuses to bound (‖q‖·‖x̂‖ ≥ 2^100, a
// non-finite estimate) is refused here first by comparisons that are false
// for NaN and for anything near the limits (so device-bounded implies
// host-bounded, and no arithmetic below can overflow): it gets lo' = −Inf
// and is always a candidate.
//
// Bindings (group 0):
//   0  sums    array<u32>        storage, read        raw sums, query j's for row r at j*n + r (F16 f32 bits, Int8 i32)
//   1  rowdata array<vec4<f32>>  storage, read        per row: scale, norm, err, ‖x̂‖² (exact.DeviceRowData)
//   2  coef    array<Coef>       storage, read        per query (exact.DeviceBoundCoefs)
//   3  keys    array<u32>        storage, read_write  lo' of query j, row r at j*n + r (f32 bits; select.wgsl reads them)
//   4  state   array<State>      storage, read_write  select.wgsl's state: n, masked, the threshold prefix, the count
//   5  cands   array<vec2<u32>>  storage, read_write  cands[j].x: query j's count; from nq + j*cap: (row, raw bits)
//   6  allow   array<u32>        storage, read        select.wgsl's allow bitmap
//
// Dispatch: bounds, then select.wgsl's first four rounds of hist and scan
// over keys (non-L2 ordering: lo' is already a key; four rounds settle the
// high word phi, which is all compact reads — or leave it a prefix with
// zero low bytes, which is at most the k-th key and so keeps more rows), then compact ((G, nq, 1)
// workgroups of 256 striding over the rows, as hist), then counts
// ((nq+63)/64 workgroups of 64).

const DIST: bool = {{.L2}};
const INT8: bool = {{.Int8}};
// The keys are ordered larger-is-better whatever the metric.
const L2: bool = false;

const MARGIN: f32 = 0x1p-16f;
const FLOOR: f32 = 0x1p-120f;
const NEG_INF: u32 = 0xff800000u;

struct Coef {
    a: f32,     // Int8: the query's scale; F16: 1
    ce: f32,    // Dot: coefficient of the row's err in the half-width
    cx: f32,    // Dot: of its norm
    cs: f32,    // Dot: of its scale
    c0: f32,    // Dot: the constant
    hlim: f32,  // Dot: norm+err below hlim keeps ‖q‖·‖x̂‖ below 2^100
    mlim: f32,  // scale·|raw| below mlim keeps |a·scale·raw| below 2^100
    qn2: f32,   // L2: ‖q‖²
    qn: f32,    // L2: ≥ ‖q‖
    hh: f32,    // L2: the half-width's coefficient of norm+err
    hs: f32,    // L2: its coefficient of the scale
    chi: f32,   // L2: ≥ (1+γ)·wide, widened
    clo: f32,   // L2: ≤ (1−γ)·wide2, narrowed
    abs: f32,   // L2: ≥ the float32 kernel's absolute allowance, normal
    cap: u32,   // candidate slots per query
    nq: u32,    // queries in this submission
}

struct State {
    phi: u32,
    plo: u32,
    remaining: u32,
    round: u32,
    count: atomic<u32>,
    n: u32,
    k: u32,
    rounds: u32,
    masked: u32,
    hist: array<atomic<u32>, 256>,
}

@group(0) @binding(0) var<storage, read> sums: array<u32>;
@group(0) @binding(1) var<storage, read> rowdata: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> coef: array<Coef>;
@group(0) @binding(3) var<storage, read_write> keys: array<u32>;
@group(0) @binding(4) var<storage, read_write> state: array<State>;
@group(0) @binding(5) var<storage, read_write> cands: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> allow: array<u32>;

{{template "order_key" .}}

fn skipped(masked: u32, i: u32) -> bool {
    let bit = 1u << (i & 31u);
    let dead_at = masked >> 1u;
    return ((masked & 1u) != 0u && (allow[i >> 5u] & bit) == 0u) ||
        (dead_at != 0u && (allow[dead_at + (i >> 5u)] & bit) != 0u);
}

struct Bound {
    lo: f32,
    hi: f32,
    ok: bool,
}

fn raw_of(bits: u32) -> f32 {
    if (INT8) {
        return f32(bitcast<i32>(bits));
    }
    return bitcast<f32>(bits);
}

// bound is the row's [lo', hi'], or ok false where the row gets no bound.
fn bound(c: Coef, x: vec4<f32>, bits: u32) -> Bound {
    var b: Bound;
    b.ok = false;
    let s = x.x;
    let xn = x.y;
    let e = x.z;
    let hat2 = x.w;
    let raw = raw_of(bits);
    // False for NaN: such a row stays unbounded.
    if (!(s >= 0.0 && s < 0x1p62f && abs(raw) < 0x1p126f && xn >= 0.0 && xn < 0x1p60f &&
          e >= 0.0 && e < 0x1p60f && hat2 >= 0.0 && hat2 < 0x1p110f)) {
        return b;
    }
    // A subnormal scale might be flushed to zero, and with it the whole
    // estimate: such a row is not bounded here. (Norm and err reach the
    // device rounded up to normal floats; see exact.DeviceRowData.)
    let sb = bitcast<u32>(s);
    if ((sb & 0x7f800000u) == 0u && sb != 0u) {
        return b;
    }
    // s·|raw| < mlim, tested at 2^-64 scale so that nothing overflows
    // (both sides below 2^124; a product flushed to zero is far below
    // any mlim, which is at least 2^-21).
    if (!(s * (abs(raw) * 0x1p-64f) < c.mlim * 0x1p-64f)) {
        return b;
    }
    let dot = c.a * (s * raw);
    // A subnormal float16 sum may be flushed to zero: its share of the
    // estimate is below a·s·2^-126, added to the half-width (an Int8 sum is
    // an integer, never subnormal).
    let flushed = c.a * (s * 0x1p-126f);
    let hn = xn + e;
    if (DIST) {
        let r = c.qn + hn;
        if (!(r < 0x1p49f)) {
            return b;
        }
        let half = (c.hh * hn + c.hs * s) + flushed;
        let slack = 2.0 * half + 0x1p-22f * (hn * hn) + 0x1p-30f * (r * r);
        let d2 = (c.qn2 - 2.0 * dot) + hat2;
        let mag = ((c.qn2 + 2.0 * abs(dot)) + hat2) + slack;
        let w = (slack + MARGIN * mag) + FLOOR;
        let up = d2 + w;
        let dn = d2 - w;
        let rhi = (sqrt(max(up, FLOOR)) * (1.0 + 0x1p-18f) + e) * (1.0 + 0x1p-18f);
        let rlo = max(sqrt(max(dn, 0.0)) * (1.0 - 0x1p-18f) - e, 0.0) * (1.0 - 0x1p-18f);
        let shi = (rhi * rhi) * c.chi + c.abs;
        let slo = (rlo * rlo) * c.clo - c.abs;
        b.lo = -shi;
        b.hi = -slo;
        b.ok = true;
        return b;
    }
    if (!(hn < c.hlim)) {
        return b;
    }
    let w = (((c.ce * e + c.cx * xn) + c.cs * s) + c.c0) + flushed;
    let slack = (w + MARGIN * (abs(dot) + w)) + FLOOR;
    b.lo = dot - slack;
    b.hi = dot + slack;
    b.ok = true;
    return b;
}

@compute @workgroup_size(256)
fn bounds(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let qi = wg.y;
    let n = state[qi].n;
    let c = coef[qi];
    let base = qi * n;
    let stride = nwg.x * 256u;
    for (var i = wg.x * 256u + li; i < n; i += stride) {
        let b = bound(c, rowdata[i], sums[base + i]);
        var k = NEG_INF;
        if (b.ok) {
            k = bitcast<u32>(b.lo);
        }
        keys[base + i] = k;
    }
}

@compute @workgroup_size(256)
fn compact(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let qi = wg.y;
    let n = state[qi].n;
    let phi = state[qi].phi;
    let masked = state[qi].masked;
    let c = coef[qi];
    let base = qi * n;
    let stride = nwg.x * 256u;
    for (var i = wg.x * 256u + li; i < n; i += stride) {
        if (skipped(masked, i)) {
            continue;
        }
        let bits = sums[base + i];
        let b = bound(c, rowdata[i], bits);
        // A NaN hi' (key 0) is kept too: only a number below τ' is dropped.
        let hk = order_key(b.hi);
        if (!b.ok || hk >= phi || hk == 0u) {
            let slot = atomicAdd(&state[qi].count, 1u);
            if (slot < c.cap) {
                cands[c.nq + qi * c.cap + slot] = vec2<u32>(i, bits);
            }
        }
    }
}

@compute @workgroup_size(64)
fn counts(@builtin(global_invocation_id) gid: vec3<u32>) {
    let qi = gid.x;
    if (qi < coef[0].nq) {
        cands[qi] = vec2<u32>(atomicLoad(&state[qi].count), 0u);
    }
}
