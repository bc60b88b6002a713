// select.wgsl: exact top-k of each query's scores on the device, so only k
// (score, row) pairs per query are read back, whatever the number of rows.
//
// Bindings (group 0):
//   0  scores  array<f32>           storage, read        query j's score for row r at j*n + r
//   1  state   array<State>         storage, read_write  one radix-select state per query
//   2  out     array<vec2<u32>>     storage, read_write  query j's hits at j*k ..: (score bits, row)
//   3  allow   array<u32>           storage, read        bitmap over rows (bit r of word r/32): with
//                                                        bit 0 of State.masked set, only rows whose bit is
//                                                        set take part (deleted and filtered-out rows
//                                                        skipped); masked >> 1, when not 0, is the word
//                                                        where the resident tombstones start (a set bit:
//                                                        the row is deleted and skipped)
//
// Each row gets a 64-bit key, high word the score mapped to an unsigned
// integer that sorts like the score (best highest; L2 flips it), low word
// the complement of the row index, so equal scores rank lower rows first and
// no two keys are equal. (The device knows rows, not IDs: the engine turns
// this order into ties by lower ID, engine/ties.go.) The k-th largest key
// is found by radix select, one byte per pass from the top: `hist` counts
// the rows whose key matches the bytes chosen so far, by their next byte;
// `scan` (one workgroup per query) sums the 256 counts from the top to find
// the bin that holds the k-th key and appends that byte. After eight passes
// the threshold is exact, and `compact` writes the k rows whose keys are at
// least the threshold, in no particular order. For k up to SORT_LIMIT,
// `sort` (one workgroup per query) then orders each query's k hits best
// first in place, so the host sorts nothing; past it the host sorts them.
//
// Dispatch: hist and compact as (G, queries, 1) workgroups of 256 striding
// over the rows; scan and sort as (queries, 1, 1) workgroups of 256. The host resets every State
// (prefix 0, round 0, remaining = k, count 0, histogram 0) before the first
// pass.

{{template "metric" .}}

struct State {
    phi: u32,        // chosen high-word bits
    plo: u32,        // chosen low-word bits
    remaining: u32,  // keys still to take inside the chosen prefix
    round: u32,      // bytes chosen so far, 0..8
    count: atomic<u32>,
    n: u32,          // rows
    k: u32,          // hits wanted, at most n
    rounds: u32,     // rounds that chose a byte before the threshold settled
    masked: u32,     // bit 0: rows outside the allow bitmap are skipped; >> 1: the tombstones' first word (0: none); k is at most the rows left
    hist: array<atomic<u32>, 256>,
}

@group(0) @binding(0) var<storage, read> scores: array<f32>;
@group(0) @binding(1) var<storage, read_write> state: array<State>;
@group(0) @binding(2) var<storage, read_write> out: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> allow: array<u32>;

// skipped reports whether row i is outside a masked query's allow bitmap
// or marked in the resident tombstones.
fn skipped(masked: u32, i: u32) -> bool {
    let bit = 1u << (i & 31u);
    let dead_at = masked >> 1u;
    return ((masked & 1u) != 0u && (allow[i >> 5u] & bit) == 0u) ||
        (dead_at != 0u && (allow[dead_at + (i >> 5u)] & bit) != 0u);
}

var<workgroup> local_hist: array<atomic<u32>, 256>;

{{template "order_key" .}}

// matches reports whether key (hi, lo) agrees with the prefix on the bytes
// chosen in the first `round` passes.
fn matches(hi: u32, lo: u32, phi: u32, plo: u32, round: u32) -> bool {
    if (round == 0u) {
        return true;
    }
    if (round < 4u) {
        let sh = 32u - 8u * round;
        return (hi >> sh) == (phi >> sh);
    }
    if (hi != phi) {
        return false;
    }
    if (round == 4u) {
        return true;
    }
    let sh = 64u - 8u * round;
    return (lo >> sh) == (plo >> sh);
}

fn digit(hi: u32, lo: u32, round: u32) -> u32 {
    if (round < 4u) {
        return (hi >> (24u - 8u * round)) & 255u;
    }
    return (lo >> (56u - 8u * round)) & 255u;
}

// The round a workgroup works on, read once and shared so that the whole
// workgroup returns together once a query's threshold is settled.
var<workgroup> shared_round: u32;

@compute @workgroup_size(256)
fn hist(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    atomicStore(&local_hist[li], 0u);
    let qi = wg.y;
    if (li == 0u) {
        shared_round = state[qi].round;
    }
    let round = workgroupUniformLoad(&shared_round);
    if (round >= 8u) {
        return;
    }
    let n = state[qi].n;
    let phi = state[qi].phi;
    let plo = state[qi].plo;
    let masked = state[qi].masked;
    let base = qi * n;
    let stride = nwg.x * 256u;
    for (var i = wg.x * 256u + li; i < n; i += stride) {
        if (skipped(masked, i)) {
            continue;
        }
        let hi = order_key(scores[base + i]);
        let lo = ~i;
        if (matches(hi, lo, phi, plo, round)) {
            atomicAdd(&local_hist[digit(hi, lo, round)], 1u);
        }
    }
    workgroupBarrier();
    let c = atomicLoad(&local_hist[li]);
    if (c != 0u) {
        atomicAdd(&state[qi].hist[li], c);
    }
}

// scan: one workgroup per query, one invocation per bin. The counts are
// summed from the top bin down in workgroup memory (log2(256) steps), so
// the bin holding the k-th key is found without a serial walk over global
// memory; the invocation whose bin it is appends the byte.
var<workgroup> above: array<u32, 256>;

@compute @workgroup_size(256)
fn scan(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let qi = wg.x;
    if (li == 0u) {
        shared_round = state[qi].round;
    }
    let round = workgroupUniformLoad(&shared_round);
    if (round >= 8u) {
        return;
    }
    let need = state[qi].remaining;
    let c = atomicLoad(&state[qi].hist[li]);
    atomicStore(&state[qi].hist[li], 0u);
    above[li] = c;
    // Every invocation has read remaining and round before the one that
    // finds the bin overwrites them.
    storageBarrier();
    workgroupBarrier();
    // Inclusive suffix sums: above[b] becomes the count of bins b..255.
    for (var off = 1u; off < 256u; off = off * 2u) {
        var v = above[li];
        if (li + off < 256u) {
            v += above[li + off];
        }
        workgroupBarrier();
        above[li] = v;
        workgroupBarrier();
    }
    let incl = above[li];
    let excl = incl - c;
    if (c > 0u && excl < need && need <= incl) {
        if (round < 4u) {
            state[qi].phi |= li << (24u - 8u * round);
        } else {
            state[qi].plo |= li << (56u - 8u * round);
        }
        state[qi].remaining = need - excl;
        state[qi].rounds = round + 1u;
        // When the bin holds exactly the keys still needed, every key from
        // the prefix up is in: the unchosen bytes stay zero, so compact
        // takes the whole bin, and the remaining rounds have nothing to do.
        if (c == need - excl) {
            state[qi].round = 8u;
        } else {
            state[qi].round = round + 1u;
        }
    }
}

@compute @workgroup_size(256)
fn compact(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let qi = wg.y;
    let n = state[qi].n;
    let k = state[qi].k;
    let phi = state[qi].phi;
    let plo = state[qi].plo;
    let masked = state[qi].masked;
    let base = qi * n;
    let stride = nwg.x * 256u;
    for (var i = wg.x * 256u + li; i < n; i += stride) {
        if (skipped(masked, i)) {
            continue;
        }
        let s = scores[base + i];
        let hi = order_key(s);
        let lo = ~i;
        if (hi > phi || (hi == phi && lo >= plo)) {
            let slot = atomicAdd(&state[qi].count, 1u);
            if (slot < k) {
                out[qi * k + slot] = vec2<u32>(bitcast<u32>(s), i);
            }
        }
    }
}

// sort: one workgroup per query orders its k hits best first in place, by
// the same 64-bit key as the select (order_key of the score, then the
// complement of the row), so ties stay by lower row. It is a bitonic
// network over the next power of two p >= k written with "flip" stages
// (every comparator puts the better key at the lower index), so the
// virtual slots k..p-1 count as worse than every hit and any comparator
// that touches one is skipped. A storage barrier orders the workgroup's
// writes between steps. The host dispatches it only for k <= SORT_LIMIT.
var<workgroup> shared_k: u32;

fn hit_better(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ka = order_key(bitcast<f32>(a.x));
    let kb = order_key(bitcast<f32>(b.x));
    if (ka != kb) {
        return ka > kb;
    }
    return a.y < b.y;
}

fn compare_swap(base: u32, i: u32, j: u32, k: u32) {
    if (j >= k) {
        return;
    }
    let a = out[base + i];
    let b = out[base + j];
    if (hit_better(b, a)) {
        out[base + i] = b;
        out[base + j] = a;
    }
}

@compute @workgroup_size(256)
fn sort(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let qi = wg.x;
    if (li == 0u) {
        shared_k = state[qi].k;
    }
    let k = workgroupUniformLoad(&shared_k);
    let base = qi * k;
    var p = 1u;
    while (p < k) {
        p = p << 1u;
    }
    let half = p >> 1u;
    for (var size = 2u; size <= p; size = size << 1u) {
        // Flip: pair o of each block of size with its mirror image.
        let hs = size >> 1u;
        for (var t = li; t < half; t += 256u) {
            let b = t / hs;
            let o = t % hs;
            compare_swap(base, b * size + o, b * size + size - 1u - o, k);
        }
        storageBarrier();
        for (var s = hs >> 1u; s > 0u; s = s >> 1u) {
            for (var t = li; t < half; t += 256u) {
                let i = (t / s) * 2u * s + t % s;
                compare_swap(base, i, i + s, k);
            }
            storageBarrier();
        }
    }
}
