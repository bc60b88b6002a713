// Side-by-side benchmark of a Chroma v2 HTTP server (umbra serve --http, or
// Chroma itself): add throughput, single-query latency and recall against
// the exact answer, with and without a where filter, on clustered and on
// uniform random data.
//
//   node bench.mjs URL [--n 50000] [--dim 768] [--centres 200] [--noise 0.25]
//                      [--queries 200] [--k 10] [--batch 1000] [--token T]
//                      [--no-uniform] [--keep] [--transport http|fetch]
//
// Requests are raw REST, shaped as the official chromadb@3.5.0 client sends
// them: add embeddings as base64 little-endian float32 (the server reports
// supports_base64_encoding), query embeddings as JSON numbers. One request
// in flight at a time: latency is the client's wall time per request.
//
// Transport: --transport http (the default) sends each request with
// node:http over one keep-alive connection, its body encoded to bytes before
// the clock starts, so that what is timed is the server and the wire.
// --transport fetch sends it as the official client does, with Node's fetch
// (undici) and a string body. Against a server that only reads a 4 MB add
// body and answers {}, on a 2-core VM: fetch 22.7 ms a request, 16.8 ms of
// it before the server's handler started; node:http 1.9 ms (0.5 ms). That
// cost is the same for every server, so it weighs on a fast server's ratio
// and hardly on a slow one's (docs/benchmarks.md).
//
// Data (UMBRA_SEED replays): clustered = --centres centres drawn from
// N(0, 1) per component, each row a random centre plus N(0, noise²) per
// component; queries drawn the same way (not rows of the collection).
// uniform = components uniform in [-1, 1). Every row has metadata
// {bucket: i mod 100}; the filtered queries use where {bucket: b}, which
// admits 1% of the rows. Space cosine, distances "1 - cos" as Chroma defines
// them. Recall: the share of the exact top k (float64 brute force here;
// ties within 1e-6 of the k-th distance count) that the server returned.
import http from "node:http";
import { f32, rng, seedFromEnv, toBase64F32 } from "./common.mjs";

const argv = process.argv.slice(2);
const opt = { n: 50000, dim: 768, centres: 200, noise: 0.25, queries: 200, k: 10, batch: 1000, token: null, uniform: true, keep: false, transport: "http" };
let url = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const num = () => { const v = Number(argv[++i]); if (!Number.isFinite(v)) throw new Error(`${a}: not a number`); return v; };
  switch (a) {
    case "--n": opt.n = num(); break;
    case "--dim": opt.dim = num(); break;
    case "--centres": opt.centres = num(); break;
    case "--noise": opt.noise = num(); break;
    case "--queries": opt.queries = num(); break;
    case "--k": opt.k = num(); break;
    case "--batch": opt.batch = num(); break;
    case "--token": opt.token = argv[++i]; break;
    case "--no-uniform": opt.uniform = false; break;
    case "--keep": opt.keep = true; break;
    case "--transport":
      opt.transport = argv[++i];
      if (opt.transport !== "http" && opt.transport !== "fetch") { console.error(`bench.mjs: --transport ${opt.transport}: want http or fetch`); process.exit(2); }
      break;
    default:
      if (a.startsWith("--") || url) { console.error(`bench.mjs: unknown argument ${a}`); process.exit(2); }
      url = a;
  }
}
if (!url) { console.error("usage: node bench.mjs URL [options] (see the head of bench.mjs)"); process.exit(2); }
const api = `${url.replace(/\/$/, "")}/api/v2`;
const coll = `${api}/tenants/default_tenant/databases/default_database/collections`;
const headers = { "content-type": "application/json", ...(opt.token ? { "x-chroma-token": opt.token } : {}) };
const seed = seedFromEnv();

// lastTiming is the Server-Timing header of the last answer (a server
// started with umbra serve --server-timing sends one), as {stage: ms}.
let lastTiming = null;
// req sends one request and returns its parsed answer; body is undefined,
// an object (sent as JSON), a string or bytes. An answer other than 2xx
// throws unless its status is in okStatus.
async function req(method, u, body, okStatus = []) {
  if (body !== undefined && typeof body !== "string" && !(body instanceof Uint8Array)) body = JSON.stringify(body);
  const { status, text, timing } = opt.transport === "fetch" ? await viaFetch(method, u, body) : await viaHTTP(method, u, body);
  if ((status < 200 || status > 299) && !okStatus.includes(status)) throw new Error(`${method} ${u}: ${status} ${text.slice(0, 300)}`);
  lastTiming = parseServerTiming(timing);
  return text ? JSON.parse(text) : null;
}
async function viaFetch(method, u, body) {
  const res = await fetch(u, { method, headers, body });
  return { status: res.status, text: await res.text(), timing: res.headers.get("server-timing") };
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function viaHTTP(method, u, body) {
  const bytes = body === undefined ? null : typeof body === "string" ? Buffer.from(body) : body;
  return new Promise((resolve, reject) => {
    const h = { ...headers, ...(bytes ? { "content-length": bytes.length } : {}) };
    const r = http.request(u, { method, agent, headers: h }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString(), timing: res.headers["server-timing"] ?? null }));
      res.on("error", reject);
    });
    r.on("error", reject);
    r.end(bytes ?? undefined);
  });
}
function parseServerTiming(h) {
  if (!h) return null;
  const out = {};
  for (const part of h.split(",")) {
    const [name, ...params] = part.trim().split(";");
    const dur = params.find((p) => p.trim().startsWith("dur="));
    if (dur) out[name.trim()] = Number(dur.trim().slice(4));
  }
  return out;
}

// noteStages adds the last answer's Server-Timing stages (and the
// client's latency less the server's total) to stages, {stage: [ms]}.
function noteStages(stages, tookMs) {
  if (!lastTiming) return;
  for (const [name, v] of Object.entries(lastTiming)) (stages[name] ??= []).push(v);
  (stages["client-minus-server"] ??= []).push(tookMs - (lastTiming.total ?? 0));
}
// stagesP50 is each stage's p50, printed and returned (null when the
// server sent no Server-Timing).
function stagesP50(stages) {
  if (!Object.keys(stages).length) return null;
  console.log(`    server stages p50 ms (Server-Timing): ${Object.entries(stages).map(([n, v]) => `${n} ${pct(v, 50).toFixed(3)}`).join(", ")}`);
  return Object.fromEntries(Object.entries(stages).map(([n, v]) => [n, pct(v, 50)]));
}

function makeData(kind, r) {
  const { n, dim } = opt;
  const data = new Float32Array(n * dim);
  let centres = null;
  if (kind === "clustered") {
    centres = Array.from({ length: opt.centres }, () => Float64Array.from({ length: dim }, () => r.gauss()));
  }
  const row = (out, off) => {
    if (kind === "clustered") {
      const c = centres[r.int(centres.length)];
      for (let j = 0; j < dim; j++) out[off + j] = c[j] + opt.noise * r.gauss();
    } else {
      for (let j = 0; j < dim; j++) out[off + j] = 2 * r.float() - 1;
    }
  };
  for (let i = 0; i < n; i++) row(data, i * dim);
  const queries = new Float32Array(opt.queries * dim);
  for (let q = 0; q < opt.queries; q++) row(queries, q * dim);
  return { data, queries };
}

// Exact cosine top k over the admitted rows, float64 accumulation.
function normsOf(data, n, dim) {
  const norms = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let j = 0; j < dim; j++) { const x = data[i * dim + j]; s += x * x; }
    norms[i] = Math.sqrt(s);
  }
  return norms;
}
function exactTopK(data, norms, q, dim, k, admit) {
  let qn = 0;
  for (let j = 0; j < dim; j++) qn += q[j] * q[j];
  qn = Math.sqrt(qn);
  const best = []; // {i, d} sorted ascending, length <= k
  const n = norms.length;
  for (let i = 0; i < n; i++) {
    if (admit && !admit(i)) continue;
    let dot = 0;
    const off = i * dim;
    for (let j = 0; j < dim; j++) dot += data[off + j] * q[j];
    const d = 1 - dot / (norms[i] * qn);
    if (best.length < k || d < best[best.length - 1].d) {
      let p = best.length < k ? best.length : k - 1;
      if (best.length < k) best.push(null);
      while (p > 0 && best[p - 1].d > d) { best[p] = best[p - 1]; p--; }
      best[p] = { i, d };
    }
  }
  return best;
}
function exactDist(data, norms, q, dim, i) {
  let qn = 0, dot = 0;
  for (let j = 0; j < dim; j++) { qn += q[j] * q[j]; dot += data[i * dim + j] * q[j]; }
  return 1 - dot / (norms[i] * Math.sqrt(qn));
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]; };
const ms = (x) => x.toFixed(2);

async function runOne(kind) {
  const r = rng(seed ^ (kind === "clustered" ? 0 : 0x9e3779b9));
  const { n, dim, k } = opt;
  const t0 = performance.now();
  const { data, queries } = makeData(kind, r);
  const norms = normsOf(data, n, dim);
  const name = `bench-${kind}-${n}x${dim}-${seed.toString(16)}`;
  await req("DELETE", `${coll}/${name}`, undefined, [404]);
  const c = await req("POST", coll, { name, configuration: { hnsw: { space: "cosine" } }, metadata: null, get_or_create: false });
  console.log(`${kind}: ${n} x ${dim}, data ready in ${((performance.now() - t0) / 1000).toFixed(1)} s; collection ${name} (${c.id})`);

  // add, batches of opt.batch, one at a time. Each request's body is
  // built (base64, JSON; bytes for --transport http, a string as the
  // official client hands fetch) before its clock starts: what is timed is
  // the request, from sending it to the parsed answer, so the client's own
  // encoding (the same for every server) is not counted as the server's.
  let addMs = 0;
  const addLat = [];
  const addStages = {}; // stage: [ms per request], where the server reports them
  for (let s = 0; s < n; s += opt.batch) {
    const e = Math.min(n, s + opt.batch);
    const ids = [], embs = [], metas = [];
    for (let i = s; i < e; i++) {
      ids.push(`r${i}`);
      embs.push(toBase64F32(data.subarray(i * dim, (i + 1) * dim)));
      metas.push({ bucket: i % 100 });
    }
    const json = JSON.stringify({ ids, embeddings: embs, metadatas: metas });
    const body = opt.transport === "fetch" ? json : Buffer.from(json);
    const t = performance.now();
    await req("POST", `${coll}/${c.id}/add`, body);
    const took = performance.now() - t;
    addMs += took;
    addLat.push(took);
    noteStages(addStages, took);
  }
  const addS = addMs / 1000;
  const count = await req("GET", `${coll}/${c.id}/count`);
  if (count !== n) throw new Error(`count after add: ${count}, want ${n}`);
  const out = { kind, n, dim, add_rows_per_s: n / addS, add_s: addS };
  console.log(`  add: ${n} rows in ${addS.toFixed(1)} s of requests = ${(n / addS).toFixed(0)} rows/s (batches of ${opt.batch}, bodies built before each request is timed; p50 ${ms(pct(addLat, 50))} ms, p99 ${ms(pct(addLat, 99))} ms a request)`);
  const addP50 = stagesP50(addStages);
  if (addP50) out.add_server_timing_p50_ms = addP50;

  for (const filtered of [false, true]) {
    const lat = [];
    const stages = {}; // stage: [ms per query], where the server reports them
    let rec = 0;
    // warm-up, not measured
    for (let w = 0; w < 5; w++) {
      await req("POST", `${coll}/${c.id}/query`, { query_embeddings: [Array.from(queries.subarray(0, dim))], n_results: k, include: ["distances"] });
    }
    for (let qi = 0; qi < opt.queries; qi++) {
      const q = queries.subarray(qi * dim, (qi + 1) * dim);
      const bucket = qi % 100;
      const json = JSON.stringify({ query_embeddings: [Array.from(q)], n_results: k, include: ["distances"], ...(filtered ? { where: { bucket } } : {}) });
      const body = opt.transport === "fetch" ? json : Buffer.from(json);
      const t = performance.now();
      const res = await req("POST", `${coll}/${c.id}/query`, body);
      lat.push(performance.now() - t);
      noteStages(stages, lat[lat.length - 1]);
      const want = exactTopK(data, norms, q, dim, k, filtered ? (i) => i % 100 === bucket : null);
      const kth = want[want.length - 1].d;
      let hits = 0;
      for (const id of new Set(res.ids[0])) {
        const i = Number(id.slice(1));
        if (filtered && i % 100 !== bucket) continue;
        if (exactDist(data, norms, q, dim, i) <= kth + 1e-6) hits++;
      }
      rec += Math.min(hits, want.length) / want.length;
    }
    rec /= opt.queries;
    const key = filtered ? "where_1pct" : "all";
    out[key] = { p50_ms: pct(lat, 50), p99_ms: pct(lat, 99), mean_ms: lat.reduce((a, b) => a + b, 0) / lat.length, recall: rec };
    console.log(`  query k=${k}${filtered ? ", where {bucket: b} (1% of rows)" : ""}: ${opt.queries} single queries p50 ${ms(pct(lat, 50))} ms, p99 ${ms(pct(lat, 99))} ms, recall ${rec.toFixed(3)}`);
    const p50 = stagesP50(stages);
    if (p50) out[key].server_timing_p50_ms = p50;
  }
  if (!opt.keep) await req("DELETE", `${coll}/${name}`);
  return out;
}

const version = await req("GET", `${api}/version`);
console.log(`bench.mjs: ${url} (version ${JSON.stringify(version)}), seed ${seed}, node ${process.version}, raw REST via ${opt.transport === "fetch" ? "Node's fetch" : "node:http"}, sequential`);
console.log(`  options ${JSON.stringify(opt)}`);
const results = [await runOne("clustered")];
if (opt.uniform) results.push(await runOne("uniform"));
console.log("JSON " + JSON.stringify({ url, version, seed, options: opt, results }));
