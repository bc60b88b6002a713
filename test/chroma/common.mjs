// Shared by client.test.mjs, differential.mjs and bench.mjs: seeded random
// data, Chroma's distance definitions computed in float64 (the brute force
// every answer is checked against), a model of Chroma's where and
// where_document filters, and the exactness check for a query answer.

// Seed: UMBRA_SEED (decimal or 0x hex) replays a run; otherwise a fresh one,
// printed so that a failure can be replayed.
export function seedFromEnv() {
  const s = process.env.UMBRA_SEED;
  if (s !== undefined && s !== "") {
    const v = Number(s);
    if (!Number.isFinite(v)) throw new Error(`UMBRA_SEED=${s}: not a number`);
    return v >>> 0;
  }
  return (Math.random() * 2 ** 32) >>> 0;
}

// mulberry32: small, fast, good enough for test data.
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  let spare = null;
  return {
    float: next,
    int: (n) => Math.floor(next() * n),
    gauss() {
      if (spare !== null) { const s = spare; spare = null; return s; }
      let u = 0;
      while (u === 0) u = next();
      const v = next();
      const r = Math.sqrt(-2 * Math.log(u));
      spare = r * Math.sin(2 * Math.PI * v);
      return r * Math.cos(2 * Math.PI * v);
    },
  };
}

// Vectors are float32 on the wire and in both servers: round once here so
// the brute force sees exactly what the server stores.
export const f32 = (v) => v.map(Math.fround);

export function gaussVec(r, dim) { return f32(Array.from({ length: dim }, () => r.gauss())); }
export function uniformVec(r, dim) { return f32(Array.from({ length: dim }, () => r.float())); }

// Chroma's distances: l2 is the squared Euclidean distance, ip is 1 - a·b,
// cosine is 1 - cos(a, b).
export function distance(space, a, b) {
  let dot = 0, na = 0, nb = 0, l2 = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
    const d = a[i] - b[i];
    l2 += d * d;
  }
  switch (space) {
    case "l2": return l2;
    case "ip": return 1 - dot;
    case "cosine": return 1 - dot / (Math.sqrt(na) * Math.sqrt(nb));
    default: throw new Error(`unknown space ${space}`);
  }
}

// How far a float32 computation of distance(space, a, b) may honestly land
// from the float64 one: a few units of float32 rounding per term of the
// sums it is made of (the servers may also normalise or expand |a-b|²).
export function tolerance(space, a, b) {
  const eps = 2 ** -24;
  let s = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    s += Math.abs(a[i] * b[i]);
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  const d = a.length;
  switch (space) {
    case "l2": return 4 * (d + 4) * eps * (na + nb) + 1e-6;
    case "ip": return 4 * (d + 4) * eps * (s + 1) + 1e-6;
    case "cosine": return 4 * (d + 4) * eps * (s / Math.sqrt(na * nb) + 1) + 1e-6;
  }
  throw new Error(`unknown space ${space}`);
}

// ---- where / where_document, as Chroma 3.5 defines them ----

// Chroma's negations ($ne, $nin, $not_contains) are the complements of
// their positives: a record without the key matches them (checked against
// chromadb 3.5.0's server: {s: {$ne: "x"}} admits a record with no s).
function cmp(op, have, want) {
  switch (op) {
    case "$ne": return !cmp("$eq", have, want);
    case "$nin": return !cmp("$in", have, want);
    case "$not_contains": return !cmp("$contains", have, want);
  }
  if (have === undefined || have === null) return false;
  switch (op) {
    case "$eq": return Array.isArray(have) ? false : have === want;
    case "$gt": return typeof have === "number" && have > want;
    case "$gte": return typeof have === "number" && have >= want;
    case "$lt": return typeof have === "number" && have < want;
    case "$lte": return typeof have === "number" && have <= want;
    case "$in": return !Array.isArray(have) && want.includes(have);
    case "$contains": return Array.isArray(have) && have.includes(want);
  }
  throw new Error(`model: unsupported operator ${op}`);
}

export function matchWhere(where, meta) {
  if (!where || Object.keys(where).length === 0) return true;
  const m = meta || {};
  return Object.entries(where).every(([k, v]) => {
    if (k === "$and") return v.every((w) => matchWhere(w, m));
    if (k === "$or") return v.some((w) => matchWhere(w, m));
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      return Object.entries(v).every(([op, want]) => cmp(op, m[k], want));
    }
    return cmp("$eq", m[k], v);
  });
}

export function matchWhereDocument(wd, doc) {
  if (!wd || Object.keys(wd).length === 0) return true;
  return Object.entries(wd).every(([k, v]) => {
    switch (k) {
      case "$and": return v.every((w) => matchWhereDocument(w, doc));
      case "$or": return v.some((w) => matchWhereDocument(w, doc));
      case "$contains": return typeof doc === "string" && doc.includes(v);
      case "$not_contains": return typeof doc !== "string" || !doc.includes(v);
      case "$regex": return typeof doc === "string" && new RegExp(v).test(doc);
      case "$not_regex": return typeof doc !== "string" || !new RegExp(v).test(doc);
    }
    throw new Error(`model: unsupported where_document operator ${k}`);
  });
}

// exactCheck verifies one query answer (ids and distances, in the order the
// server gave) against the float64 brute force over the admissible rows
// (a Map id -> {embedding}). Returns null when the answer is exact, else a
// description of the first difference. Ids whose exact distances lie within
// float32 rounding of each other may come in either order.
export function exactCheck(space, q, rows, k, gotIds, gotDists) {
  const all = [];
  for (const [id, r] of rows) all.push({ id, d: distance(space, q, r.embedding), tol: tolerance(space, q, r.embedding) });
  all.sort((x, y) => x.d - y.d);
  const want = all.slice(0, k);
  if (gotIds.length !== want.length) {
    return `expected ${want.length} results (k=${k}, ${rows.size} admissible rows), got ${gotIds.length}: [${gotIds.join(",")}]`;
  }
  const byId = new Map(all.map((x) => [x.id, x]));
  const seen = new Set();
  for (let i = 0; i < gotIds.length; i++) {
    const id = gotIds[i];
    const e = byId.get(id);
    if (!e) return `result ${i} is ${JSON.stringify(id)}, which is not an admissible row`;
    if (seen.has(id)) return `result ${i}: id ${JSON.stringify(id)} returned twice`;
    seen.add(id);
    const tol = Math.max(e.tol, want[i].tol);
    if (Math.abs(e.d - want[i].d) > 2 * tol) {
      return `result ${i} is ${id} at exact distance ${e.d}, but rank ${i} exactly is ${want[i].id} at ${want[i].d} (tolerance ${tol.toExponential(2)})`;
    }
    if (gotDists) {
      const g = gotDists[i];
      if (typeof g !== "number" || Math.abs(g - e.d) > e.tol) {
        return `result ${i} (${id}): distance ${g}, exact float64 ${e.d} (|diff| ${Math.abs(g - e.d).toExponential(2)} > float32 tolerance ${e.tol.toExponential(2)})`;
      }
    }
  }
  return null;
}

// recall of gotIds against the exact top k (ties at the boundary counted as hits).
export function recall(space, q, rows, k, gotIds) {
  const all = [];
  for (const [id, r] of rows) all.push({ id, d: distance(space, q, r.embedding), tol: tolerance(space, q, r.embedding) });
  all.sort((x, y) => x.d - y.d);
  const want = all.slice(0, k);
  if (want.length === 0) return 1;
  const kth = want[want.length - 1];
  const byId = new Map(all.map((x) => [x.id, x]));
  let hits = 0;
  for (const id of new Set(gotIds)) {
    const e = byId.get(id);
    if (e && e.d <= kth.d + 2 * kth.tol) hits++;
  }
  return Math.min(hits, want.length) / want.length;
}

export function deepEqual(a, b) {
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}
export function canon(v) {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v).sort()) o[k] = canon(v[k]);
    return o;
  }
  return v;
}

// Little-endian float32 base64, as the official client sends embeddings
// once pre-flight-checks reports supports_base64_encoding.
export function toBase64F32(vec) {
  const f = vec instanceof Float32Array ? vec : Float32Array.from(vec);
  if (littleEndian) return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString("base64");
  const b = Buffer.alloc(f.length * 4);
  f.forEach((x, i) => b.writeFloatLE(x, i * 4));
  return b.toString("base64");
}
const littleEndian = new Uint8Array(Float32Array.of(1).buffer)[3] === 0x3f;
