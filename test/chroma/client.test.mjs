// Drives a Chroma v2 HTTP server with the official JavaScript client
// (chromadb@3.5.0) and checks every answer: shapes as Chroma gives them,
// and query answers exact against a float64 brute force in each space.
//
//   node client.test.mjs URL [--token T] [--reset allowed|refused] [--reference]
//
// URL        the server, e.g. http://127.0.0.1:8000
// --token T  the server requires token T: the suite sends it (x-chroma-token,
//            and Authorization: Bearer for one client) and checks that
//            requests without it, or with a wrong one, get 401
// --reset    also check POST /api/v2/reset: "refused" (403, the client's
//            ChromaForbiddenError) or "allowed" (then every tenant, database
//            and collection but the defaults is gone; run it last)
// --reference the server is Chroma itself: on the large uniform collection,
//            where HNSW is approximate, recall is reported instead of
//            required (umbra must be exact everywhere)
//
// UMBRA_SEED replays the random data. Exits 1 at the first failure with the
// request and the server's raw answer; prints a summary of what ran.
import {
  AdminClient, ChromaClient, ChromaClientError, ChromaForbiddenError, ChromaNotFoundError,
  ChromaServerError, ChromaUnauthorizedError, ChromaUniqueError,
} from "chromadb";
import {
  canon, deepEqual, exactCheck, f32, gaussVec, matchWhere, matchWhereDocument, recall, rng,
  seedFromEnv,
} from "./common.mjs";

// ---- arguments ----
const argv = process.argv.slice(2);
let url = null, token = null, resetMode = null, reference = false;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--token") token = argv[++i];
  else if (a === "--reset") resetMode = argv[++i];
  else if (a === "--reference") reference = true;
  else if (!a.startsWith("--") && url === null) url = a;
  else usage(`unknown argument ${a}`);
}
if (!url) usage("missing URL");
if (resetMode !== null && resetMode !== "allowed" && resetMode !== "refused") usage(`--reset ${resetMode}: want allowed or refused`);
function usage(msg) {
  console.error(`client.test.mjs: ${msg}\nusage: node client.test.mjs URL [--token T] [--reset allowed|refused] [--reference]`);
  process.exit(2);
}
const base = new URL(url);
const host = base.hostname, port = Number(base.port || (base.protocol === "https:" ? 443 : 80)), ssl = base.protocol === "https:";
const api = `${base.protocol}//${base.host}/api/v2`;
const authHeaders = token ? { "x-chroma-token": token } : undefined;

const seed = seedFromEnv();
const R = rng(seed);
const tag = `${seed.toString(16)}-${Date.now().toString(36)}`;
console.log(`client.test.mjs: ${url} seed ${seed} (UMBRA_SEED=${seed} replays)${reference ? " [reference: Chroma itself]" : ""}`);

// ---- the wire: remember the last exchange, so a failure shows it ----
let last = null;
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const req = input instanceof Request ? input : new Request(input, init);
  const reqBody = req.body ? await req.clone().text() : "";
  const res = await realFetch(input, init);
  const text = await res.clone().text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  last = { method: req.method, url: req.url, reqBody, status: res.status, text, json };
  return res;
};
function lastExchange() {
  if (!last) return "(no request)";
  const cut = (s) => (s.length > 600 ? s.slice(0, 600) + "…" : s);
  return `${last.method} ${last.url} ${cut(last.reqBody)}\n  -> ${last.status} ${cut(last.text)}`;
}

// raw REST: for what the client hides (raw shapes, JSON embeddings, auth).
async function raw(method, path, body, headers = authHeaders) {
  const res = await fetch(api + path, {
    method,
    headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...(headers || {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: last.json, text: last.text };
}

// ---- checks ----
class Failure extends Error {}
let section = "", checks = 0;
const ran = [];
function check(cond, msg) {
  checks++;
  if (!cond) throw new Failure(typeof msg === "function" ? msg() : msg);
}
function checkEq(got, want, what) {
  checks++;
  if (!deepEqual(got, want)) {
    throw new Failure(`${what}:\n  want ${short(want)}\n  got  ${short(got)}`);
  }
}
function short(v) { const s = JSON.stringify(canon(v)); return s && s.length > 800 ? s.slice(0, 800) + "…" : s; }
async function expectError(what, errClass, fn) {
  checks++;
  let err = null;
  try { await fn(); } catch (e) { err = e; }
  if (!err) throw new Failure(`${what}: expected ${errClass.name}, the call succeeded`);
  if (!(err instanceof errClass)) {
    throw new Failure(`${what}: expected ${errClass.name}, got ${err.name}: ${err.message}`);
  }
  return err;
}
async function run(name, fn) {
  section = name;
  const before = checks;
  const t0 = performance.now();
  await fn();
  ran.push(`${name}: ${checks - before} checks, ${((performance.now() - t0) / 1000).toFixed(2)} s`);
}

// ---- the model: what the collection must hold ----
class Model {
  constructor(space, dim) { this.space = space; this.dim = dim; this.rows = new Map(); }
  add(ids, embs, metas, docs, uris) {
    ids.forEach((id, i) => {
      if (this.rows.has(id)) return; // Chroma ignores an add of an existing id
      this.rows.set(id, { embedding: embs[i], metadata: metas ? metas[i] ?? null : null, document: docs ? docs[i] ?? null : null, uri: uris ? uris[i] ?? null : null });
    });
  }
  // update and upsert of an existing id: given fields replace, metadata merges
  // key by key (a null value removes the key).
  update(ids, embs, metas, docs, uris, insert) {
    ids.forEach((id, i) => {
      const r = this.rows.get(id);
      if (!r) {
        if (insert) this.add([id], [embs[i]], metas && [metas[i]], docs && [docs[i]], uris && [uris[i]]);
        return;
      }
      if (embs) r.embedding = embs[i];
      if (metas && metas[i] != null) {
        const m = { ...(r.metadata || {}) };
        for (const [k, v] of Object.entries(metas[i])) { if (v === null) delete m[k]; else m[k] = v; }
        r.metadata = Object.keys(m).length ? m : null;
      }
      if (docs) r.document = docs[i];
      if (uris) r.uri = uris[i];
    });
  }
  filter(where, wd, ids) {
    const out = new Map();
    for (const [id, r] of this.rows) {
      if (ids && !ids.includes(id)) continue;
      if (!matchWhere(where, r.metadata)) continue;
      if (!matchWhereDocument(wd, r.document)) continue;
      out.set(id, r);
    }
    return out;
  }
}

const WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "omega"];
function makeRows(start, n, dim, withUris) {
  const ids = [], embs = [], metas = [], docs = [], uris = [];
  for (let i = start; i < start + n; i++) {
    ids.push(`rec-${i}`);
    embs.push(gaussVec(R, dim));
    const words = WORDS.filter(() => R.float() < 0.35);
    metas.push({
      cat: `c${R.int(5)}`,
      n: i,
      f: (Math.round(R.float() * 1e6) + 0.5) / 1e6, // never integral, short decimal form (see differential.mjs)
      flag: R.float() < 0.5,
      ...(R.float() < 0.3 ? { tags: [R.int(4), R.int(4) + 4] } : {}),
      ...(R.float() < 0.3 ? { labels: words.length ? words : ["none"] } : {}),
      ...(R.float() < 0.5 ? { opt: R.int(4) } : {}),
    });
    docs.push(`doc ${i} ${words.join(" ")}`.trim());
    uris.push(`https://example.org/rec/${i}`);
  }
  return { ids, embs, metas, docs, uris: withUris ? uris : undefined };
}

const WHERES = [
  { cat: "c1" },
  { cat: { $ne: "c2" } },
  { n: { $gte: 100 } },
  { n: { $lt: 37 } },
  { $and: [{ f: { $gt: 0.25 } }, { f: { $lte: 0.75 } }] },
  { flag: true },
  { cat: { $in: ["c0", "c3"] } },
  { cat: { $nin: ["c0", "c3", "c4"] } },
  { $and: [{ cat: { $in: ["c1", "c2"] } }, { flag: false }] },
  { $or: [{ n: { $lt: 20 } }, { cat: "c4" }] },
  { tags: { $contains: 5 } },
  { labels: { $contains: "beta" } },
  // negations admit the records that lack the key, as in Chroma
  { opt: { $ne: 2 } },
  { opt: { $nin: [0, 1] } },
  { labels: { $not_contains: "alpha" } },
  { n: 42 },
];
const WHERE_DOCS = [
  { $contains: "alpha" },
  { $not_contains: "beta" },
  { $and: [{ $contains: "gamma" }, { $contains: "delta" }] },
  { $or: [{ $contains: "omega" }, { $contains: "epsilon" }] },
  { $regex: "^doc 1[0-9] " },
  { $not_regex: "a$" },
];

// checkRows: the records the server returned (get shape) agree with the model.
function checkRecords(res, model, include, what) {
  res.ids.forEach((id, i) => {
    const r = model.rows.get(id);
    check(r, () => `${what}: returned id ${id}, which the collection should not hold`);
    if (include.includes("embeddings")) checkEmbedding(res.embeddings[i], r.embedding, model.space, `${what}: embedding of ${id}`);
    if (include.includes("metadatas")) checkEq(normMeta(res.metadatas[i]), r.metadata, `${what}: metadata of ${id}`);
    if (include.includes("documents")) checkEq(res.documents[i], r.document, `${what}: document of ${id}`);
    if (include.includes("uris")) checkEq(res.uris[i], r.uri, `${what}: uri of ${id}`);
  });
}
// An embedding reads back as the float32 values sent, except in cosine
// space: Chroma stores the vector normalised and hands back the product
// with its norm, a float32 ulp or two off what was sent, and umbra (which
// also keeps cosine rows normalised) does the same. That much slack there.
function checkEmbedding(got, want, space, what) {
  const g = f32(Array.from(got ?? []));
  if (space === "cosine" && g.length === want.length) {
    checks++;
    const bad = g.findIndex((x, i) => Math.abs(x - want[i]) > 4e-7 * Math.abs(want[i]) + 1e-12);
    if (bad >= 0) throw new Failure(`${what}: component ${bad}: want ${want[bad]}, got ${g[bad]} (beyond 4e-7 relative)`);
    return;
  }
  checkEq(g, want, `${what} (as float32)`);
}
// A record stored without metadata reads back as null (Chroma reads {} for
// one stored with a document and no metadata: both mean "none").
function normMeta(m) { return m && Object.keys(m).length === 0 ? null : m ?? null; }
const sortIds = (ids) => [...ids].sort();

async function checkWholeCollection(col, model, what) {
  checkEq(await col.count(), model.rows.size, `${what}: count`);
  const all = ["embeddings", "metadatas", "documents", "uris"];
  const res = await col.get({ include: all });
  checkEq(res.ids, [...model.rows.keys()], `${what}: get() ids, in insertion order as Chroma returns them`);
  checkRecords(res, model, all, `${what}: get()`);
}

async function checkQueries(col, model, queries, k, opts, what) {
  const include = ["distances", "embeddings", "metadatas", "documents", "uris"];
  const res = await col.query({ queryEmbeddings: queries, nResults: k, include, ...opts });
  check(Array.isArray(res.ids) && res.ids.length === queries.length, () => `${what}: ${queries.length} queries, got ${res.ids?.length} result lists\n${lastExchange()}`);
  checkEq(last.json.include, include, `${what}: include echoed`);
  const admissible = model.filter(opts.where, opts.whereDocument, opts.ids);
  queries.forEach((q, qi) => {
    const err = exactCheck(model.space, q, admissible, k, res.ids[qi], res.distances[qi]);
    check(err === null, () => `${what}: query ${qi} (${model.space}, k=${k}, opts ${JSON.stringify(opts)}) not exact: ${err}\n${lastExchange()}`);
    const per = { ids: res.ids[qi], embeddings: res.embeddings[qi], metadatas: res.metadatas[qi], documents: res.documents[qi], uris: res.uris[qi] };
    checkRecords(per, model, include, `${what}: query ${qi} records`);
  });
}

// Chroma 1.x (the reference) keeps a deleted collection's array-valued
// record metadata and hands it to the records of a later collection (seen
// with chromadb 3.5.0's server: a fresh collection's rec-3 read back with
// the tags of a deleted one's rec-3). So against the reference the suite
// leaves its collections in place; against umbra it drops them.
async function dropCollections() {
  if (reference) {
    if (created.length) console.log(`  (reference: left ${created.length} collections in place, see dropCollections)`);
    created.length = 0;
    return;
  }
  for (const name of created.splice(0)) await client.deleteCollection({ name }).catch(() => {});
}

// modify(configuration): the one HNSW parameter a user tunes at run time.
async function modifyEfSearch(col) {
  await col.modify({ configuration: { hnsw: { ef_search: 200 } } });
  checkEq(JSON.parse(last.reqBody), { new_configuration: { hnsw: { ef_search: 200 } } }, "the client's modify(configuration) request");
}

// ---- the suite ----
const client = new ChromaClient({ host, port, ssl, headers: authHeaders });
const admin = new AdminClient({ host, port, ssl, headers: authHeaders });
const created = []; // collection names to drop at the end

async function main() {
  await run("system", async () => {
    const hb = await client.heartbeat();
    check(typeof hb === "number" && hb > 0, `heartbeat: want a positive nanosecond count, got ${hb}`);
    checkEq(Object.keys(last.json), ["nanosecond heartbeat"], "heartbeat body keys");
    const v = await client.version();
    check(typeof v === "string" && v.length > 0, `version: want a non-empty string, got ${JSON.stringify(v)}`);
    const pf = await client.getPreflightChecks();
    check(Number.isInteger(pf.max_batch_size) && pf.max_batch_size > 0, `pre-flight-checks: max_batch_size ${pf.max_batch_size}`);
    check(pf.supports_base64_encoding === true, `pre-flight-checks: supports_base64_encoding ${pf.supports_base64_encoding}, the client sends base64 only when true`);
    checkEq(await client.getMaxBatchSize(), pf.max_batch_size, "getMaxBatchSize");
    const hc = await raw("GET", "/healthcheck");
    check(hc.status === 200, `GET /healthcheck: status ${hc.status} ${hc.text}`);
    const id = await client.getUserIdentity();
    checkEq(id.tenant, "default_tenant", "auth identity tenant");
    check(Array.isArray(id.databases) && id.databases.includes("default_database"), `auth identity databases ${JSON.stringify(id.databases)}`);
  });

  if (token) {
    await run("auth", async () => {
      for (const [what, headers] of [["no token", {}], ["wrong x-chroma-token", { "x-chroma-token": token + "x" }], ["wrong bearer", { authorization: `Bearer ${token}x` }]]) {
        const r = await raw("GET", "/tenants/default_tenant/databases/default_database/collections", undefined, headers);
        check(r.status === 401, `${what}: want 401, got ${r.status} ${r.text}`);
        check(r.json && typeof r.json.error === "string" && typeof r.json.message === "string", `${what}: want Chroma's {error, message}, got ${r.text}`);
      }
      const bad = new ChromaClient({ host, port, ssl, headers: { "x-chroma-token": "not-" + token } });
      await expectError("client with a wrong token lists collections", ChromaUnauthorizedError, () => bad.listCollections());
      const bearer = new ChromaClient({ host, port, ssl, headers: { authorization: `Bearer ${token}` } });
      check(Array.isArray(await bearer.listCollections()), "client with Authorization: Bearer lists collections");
    });
  }

  await run("tenants and databases", async () => {
    checkEq(await admin.getTenant({ name: "default_tenant" }), "default_tenant", "getTenant default_tenant");
    const db = await admin.getDatabase({ name: "default_database", tenant: "default_tenant" });
    checkEq([db.name, db.tenant], ["default_database", "default_tenant"], "getDatabase default_database");
    const tenant = `tenant-${tag}`, dbName = `db-${tag}`;
    await admin.createTenant({ name: tenant });
    checkEq(await admin.getTenant({ name: tenant }), tenant, "getTenant after createTenant");
    await expectError("createTenant twice", ChromaUniqueError, () => admin.createTenant({ name: tenant }));
    await admin.createDatabase({ name: dbName, tenant });
    const got = await admin.getDatabase({ name: dbName, tenant });
    checkEq([got.name, got.tenant], [dbName, tenant], "getDatabase after createDatabase");
    check(typeof got.id === "string" && got.id.length > 0, `database id ${got.id}`);
    const list = await admin.listDatabases({ tenant });
    checkEq(list.map((d) => d.name), [dbName], "listDatabases of the new tenant");
    await expectError("createDatabase twice", ChromaUniqueError, () => admin.createDatabase({ name: dbName, tenant }));
    await expectError("getTenant of a tenant never created", ChromaNotFoundError, () => admin.getTenant({ name: `never-${tag}` }));
    await expectError("getDatabase never created", ChromaNotFoundError, () => admin.getDatabase({ name: `never-${tag}`, tenant }));
    // Chroma creates a database under a tenant that was never created.
    await admin.createDatabase({ name: dbName, tenant: `orphan-${tag}` });
    const orphan = await admin.getDatabase({ name: dbName, tenant: `orphan-${tag}` });
    checkEq(orphan.name, dbName, "database under a tenant never created");
    // Collections are scoped to their tenant and database.
    const scoped = new ChromaClient({ host, port, ssl, headers: authHeaders, tenant, database: dbName });
    const name = `scoped-${tag}`;
    const c = await scoped.createCollection({ name, embeddingFunction: null });
    checkEq([c.tenant, c.database], [tenant, dbName], "collection's tenant and database");
    await c.add({ ids: ["x"], embeddings: [[1, 2, 3]] });
    checkEq(await c.count(), 1, "count in the scoped collection");
    await expectError("the scoped collection is not in default_database", ChromaNotFoundError, () => client.getCollection({ name }));
    checkEq(await scoped.countCollections(), 1, "countCollections in the new database");
    await scoped.deleteCollection({ name });
    await admin.deleteDatabase({ name: dbName, tenant });
    await expectError("getDatabase after deleteDatabase", ChromaNotFoundError, () => admin.getDatabase({ name: dbName, tenant }));
  });

  const spaces = [
    // cosine through configuration, l2 by default, ip through the legacy metadata key.
    { space: "cosine", create: { configuration: { hnsw: { space: "cosine" } }, metadata: { purpose: "umbra client test", n: 1, ratio: 0.5, on: true } } },
    { space: "l2", create: {} },
    { space: "ip", create: { metadata: { "hnsw:space": "ip" } } },
  ];
  const cols = {};
  await run("collections", async () => {
    const before = await client.countCollections();
    for (const s of spaces) {
      const name = `umbra-${s.space}-${tag}`;
      const col = await client.createCollection({ name, embeddingFunction: null, ...s.create });
      created.push(name);
      const rawCol = last.json;
      checkEq(Object.keys(rawCol).filter((k) => ["id", "name", "tenant", "database", "configuration_json", "metadata"].includes(k)).sort(),
        ["configuration_json", "database", "id", "metadata", "name", "tenant"], `create ${name}: collection fields`);
      checkEq([col.name, col.tenant, col.database], [name, "default_tenant", "default_database"], `create ${name}: name, tenant, database`);
      checkEq(rawCol.configuration_json?.hnsw?.space, s.space, `create ${name}: configuration_json.hnsw.space`);
      checkEq(rawCol.metadata, s.create.metadata ?? null, `create ${name}: metadata (null when there is none)`);
      cols[s.space] = { col, name, model: new Model(s.space, 16) };
    }
    checkEq(await client.countCollections(), before + spaces.length, "countCollections after three creates");
    // get_or_create returns the existing one, unchanged.
    const { col: cos, name: cosName } = cols.cosine;
    const again = await client.getOrCreateCollection({ name: cosName, embeddingFunction: null, metadata: { other: "x" } });
    checkEq([again.id, again.metadata], [cos.id, spaces[0].create.metadata], "getOrCreateCollection of an existing collection");
    await expectError("createCollection of an existing name", ChromaUniqueError, () => client.createCollection({ name: cosName, embeddingFunction: null }));
    const byName = await client.getCollection({ name: cosName });
    checkEq([byName.id, byName.metadata, byName.configuration?.hnsw?.space], [cos.id, spaces[0].create.metadata, "cosine"], "getCollection by name");
    const byId = await client.getCollectionById(cos.id);
    checkEq([byId.name, byId.id], [cosName, cos.id], "getCollectionById");
    const list = await client.listCollections({ limit: 1000 });
    for (const s of spaces) check(list.some((c) => c.name === cols[s.space].name), `listCollections lacks ${cols[s.space].name}`);
    // A default-embedding-function collection echoes the function's config.
    const efName = `umbra-ef-${tag}`;
    const ef = await raw("POST", "/tenants/default_tenant/databases/default_database/collections",
      { name: efName, configuration: { embedding_function: { name: "default", type: "known", config: {} } }, metadata: null, get_or_create: false });
    created.push(efName);
    check(ef.status === 200, `create with embedding_function: ${ef.status} ${ef.text}`);
    checkEq(ef.json.configuration_json?.embedding_function, { name: "default", type: "known", config: {} }, "configuration_json.embedding_function echoed");
    checkEq(ef.json.configuration_json?.hnsw?.space, "l2", "default space");
    // modify: name and metadata.
    const tmpName = `umbra-rename-${tag}`;
    const tmp = await client.createCollection({ name: tmpName, embeddingFunction: null, metadata: { a: 1 } });
    created.push(`${tmpName}-2`);
    await tmp.modify({ name: `${tmpName}-2`, metadata: { b: "two" } });
    await modifyEfSearch(tmp);
    const renamed = await client.getCollection({ name: `${tmpName}-2` });
    checkEq([renamed.id, renamed.metadata], [tmp.id, { b: "two" }], "getCollection after modify(name, metadata)");
    checkEq(renamed.configuration?.hnsw?.ef_search, 200, "configuration_json.hnsw.ef_search after modify(configuration)");
    await expectError("getCollection of the old name after a rename", ChromaNotFoundError, () => client.getCollection({ name: tmpName }));
    await client.deleteCollection({ name: `${tmpName}-2` });
    await expectError("getCollection after deleteCollection", ChromaNotFoundError, () => client.getCollection({ name: `${tmpName}-2` }));
    await expectError("deleteCollection of a missing collection", ChromaNotFoundError, () => client.deleteCollection({ name: `${tmpName}-2` }));
    await expectError("createCollection with an invalid name", ChromaClientError, () => client.createCollection({ name: "x", embeddingFunction: null }));
  });

  for (const s of spaces) {
    const { col, model } = cols[s.space];
    await run(`records (${s.space})`, async () => {
      const b1 = makeRows(0, 160, 16, true);
      await col.add({ ids: b1.ids, embeddings: b1.embs, metadatas: b1.metas, documents: b1.docs, uris: b1.uris });
      model.add(b1.ids, b1.embs, b1.metas, b1.docs, b1.uris);
      const b2 = makeRows(160, 80, 16, false);
      await col.add({ ids: b2.ids, embeddings: b2.embs, metadatas: b2.metas, documents: b2.docs });
      model.add(b2.ids, b2.embs, b2.metas, b2.docs, undefined);
      await checkWholeCollection(col, model, "after add");

      // get by ids (the server answers in its own order).
      const some = [...model.rows.keys()].filter(() => R.float() < 0.08).reverse();
      const all = ["embeddings", "metadatas", "documents", "uris"];
      let res = await col.get({ ids: some, include: all });
      checkEq(sortIds(res.ids), sortIds(some), "get(ids)");
      checkRecords(res, model, all, "get(ids)");
      // include: each field alone; the others come back null, include is echoed.
      for (const f of all) {
        await col.get({ ids: some.slice(0, 3), include: [f] });
        const j = last.json;
        checkEq(j.include, [f], `get include [${f}]: include echoed`);
        for (const g of all) {
          if (g === f) check(Array.isArray(j[g]) && j[g].length === j.ids.length, `get include [${f}]: ${g} missing\n${lastExchange()}`);
          else check(j[g] === null, `get include [${f}]: ${g} should be null\n${lastExchange()}`);
        }
      }
      await col.get({ ids: some.slice(0, 2) });
      checkEq(last.json.include, ["documents", "metadatas"], "get's default include");
      // where and where_document.
      for (const where of WHERES) {
        res = await col.get({ where, include: ["metadatas"] });
        checkEq(sortIds(res.ids), sortIds([...model.filter(where).keys()]), `get where ${JSON.stringify(where)}`);
        checkRecords(res, model, ["metadatas"], `get where ${JSON.stringify(where)}`);
      }
      for (const wd of WHERE_DOCS) {
        res = await col.get({ whereDocument: wd, include: ["documents"] });
        checkEq(sortIds(res.ids), sortIds([...model.filter(undefined, wd).keys()]), `get whereDocument ${JSON.stringify(wd)}`);
      }
      res = await col.get({ where: WHERES[1], whereDocument: WHERE_DOCS[0], include: [] });
      checkEq(sortIds(res.ids), sortIds([...model.filter(WHERES[1], WHERE_DOCS[0]).keys()]), "get where + whereDocument");
      res = await col.get({ ids: some, where: { flag: true }, include: [] });
      checkEq(sortIds(res.ids), sortIds([...model.filter({ flag: true }, undefined, some).keys()]), "get ids + where");
      // limit and offset page through insertion order.
      const order = [...model.rows.keys()];
      for (const [limit, offset] of [[50, 0], [50, 50], [50, 200], [7, 233], [10, 240], [1000, 0]]) {
        res = await col.get({ limit, offset, include: [] });
        checkEq(res.ids, order.slice(offset, offset + limit), `get limit ${limit} offset ${offset}`);
      }
      const filtered = [...model.filter({ cat: { $ne: "c2" } }).keys()];
      res = await col.get({ where: { cat: { $ne: "c2" } }, limit: 10, offset: 5, include: [] });
      checkEq(res.ids, filtered.slice(5, 15), "get where + limit + offset");

      // query: exact answers, every include field.
      const queries = Array.from({ length: 6 }, () => gaussVec(R, 16));
      await checkQueries(col, model, queries, 10, {}, "query");
      await checkQueries(col, model, queries.slice(0, 1), 1, {}, "query k=1");
      await checkQueries(col, model, queries.slice(0, 2), 300, {}, "query k > rows");
      for (const where of [WHERES[0], WHERES[4], WHERES[8], WHERES[11]]) {
        await checkQueries(col, model, queries.slice(0, 3), 10, { where }, `query where ${JSON.stringify(where)}`);
      }
      for (const wd of [WHERE_DOCS[0], WHERE_DOCS[2], WHERE_DOCS[4]]) {
        await checkQueries(col, model, queries.slice(0, 3), 10, { whereDocument: wd }, `query whereDocument ${JSON.stringify(wd)}`);
      }
      await checkQueries(col, model, queries.slice(0, 3), 5, { ids: some }, "query ids");
      await checkQueries(col, model, queries.slice(0, 2), 10, { where: { flag: true }, whereDocument: { $contains: "alpha" } }, "query where + whereDocument");
      // query's default include.
      await col.query({ queryEmbeddings: [queries[0]], nResults: 3 });
      checkEq(last.json.include, ["metadatas", "documents", "distances"], "query's default include");
      check(last.json.embeddings === null && last.json.uris === null, `query's default include: embeddings and uris should be null\n${lastExchange()}`);

      // writes: upsert (existing and new), update, delete.
      const up = [...model.rows.keys()].filter(() => R.float() < 0.1);
      const upNew = makeRows(1000, 10, 16, true);
      const upIds = [...up, ...upNew.ids];
      const upEmbs = [...up.map(() => gaussVec(R, 16)), ...upNew.embs];
      const upMetas = [...up.map((id) => ({ cat: "c9", upserted: true, n: Number(id.slice(4)) })), ...upNew.metas];
      const upDocs = [...up.map((id) => `upserted ${id} omega`), ...upNew.docs];
      await col.upsert({ ids: upIds, embeddings: upEmbs, metadatas: upMetas, documents: upDocs });
      model.update(upIds, upEmbs, upMetas, upDocs, undefined, true);
      const upd = [...model.rows.keys()].filter(() => R.float() < 0.1);
      const updEmbs = upd.map(() => gaussVec(R, 16));
      await col.update({ ids: upd, embeddings: updEmbs });
      model.update(upd, updEmbs);
      const upd2 = upd.slice(0, 5);
      const upd2Metas = upd2.map(() => ({ flag: false, note: "updated" }));
      const upd2Uris = upd2.map((id) => `https://example.org/updated/${id}`);
      await col.update({ ids: upd2, metadatas: upd2Metas, uris: upd2Uris });
      model.update(upd2, undefined, upd2Metas, undefined, upd2Uris);
      // The client embeds documents sent without embeddings: send both.
      const upd3 = upd.slice(3, 8);
      const upd3Docs = upd3.map((id) => `updated ${id} alpha`);
      const upd3Embs = upd3.map(() => gaussVec(R, 16));
      await col.update({ ids: upd3, embeddings: upd3Embs, documents: upd3Docs });
      model.update(upd3, upd3Embs, undefined, upd3Docs);
      await checkWholeCollection(col, model, "after upsert and update");

      const delIds = [...model.rows.keys()].filter(() => R.float() < 0.03);
      let d = await col.delete({ ids: delIds });
      checkEq(d, { deleted: delIds.length }, "delete(ids)");
      delIds.forEach((id) => model.rows.delete(id));
      const delWhere = { $and: [{ n: { $lt: 60 } }, { cat: "c1" }] };
      const wantW = [...model.filter(delWhere).keys()];
      d = await col.delete({ where: delWhere });
      checkEq(d, { deleted: wantW.length }, `delete(where ${JSON.stringify(delWhere)})`);
      wantW.forEach((id) => model.rows.delete(id));
      const delDoc = { $contains: "omega" };
      const wantD = [...model.filter(undefined, delDoc).keys()];
      d = await col.delete({ whereDocument: delDoc });
      checkEq(d, { deleted: wantD.length }, `delete(whereDocument ${JSON.stringify(delDoc)})`);
      wantD.forEach((id) => model.rows.delete(id));
      await checkWholeCollection(col, model, "after deletes");
      await checkQueries(col, model, queries, 10, {}, "query after writes");
      await checkQueries(col, model, queries.slice(0, 2), 10, { where: WHERES[9] }, "query where after writes");
    });
  }

  await run("concurrent queries", async () => {
    // 48 queries in flight at once from 6 clients, each answer exact.
    const { col, model } = cols.l2;
    const clients = Array.from({ length: 6 }, () => new ChromaClient({ host, port, ssl, headers: authHeaders }));
    const handles = await Promise.all(clients.map((c) => c.getCollectionById(col.id)));
    const jobs = Array.from({ length: 48 }, (_, i) => {
      const q = gaussVec(R, 16);
      const where = i % 3 === 0 ? WHERES[i % WHERES.length] : undefined;
      return { q, where, p: handles[i % handles.length].query({ queryEmbeddings: [q], nResults: 5, include: ["distances"], ...(where ? { where } : {}) }) };
    });
    for (const [i, j] of jobs.entries()) {
      const res = await j.p;
      const err = exactCheck("l2", j.q, model.filter(j.where), 5, res.ids[0], res.distances[0]);
      check(err === null, () => `concurrent query ${i} (where ${JSON.stringify(j.where)}) not exact: ${err}`);
    }
  });

  await run("raw REST shapes", async () => {
    const { col, model } = cols.l2;
    const p = `/tenants/default_tenant/databases/default_database/collections/${col.id}`;
    // embeddings as JSON numbers (not base64) are accepted too.
    const e = gaussVec(R, 16);
    let r = await raw("POST", `${p}/add`, { ids: ["json-numbers"], embeddings: [e], metadatas: [{ via: "json" }], documents: ["sent as json numbers"] });
    check(r.status === 201 || r.status === 200, `add with JSON-number embeddings: ${r.status} ${r.text}`);
    model.add(["json-numbers"], [e], [{ via: "json" }], ["sent as json numbers"]);
    r = await raw("POST", `${p}/get`, { ids: ["json-numbers"], include: ["embeddings", "metadatas", "documents"] });
    checkEq(r.json.embeddings.map(f32), [e], "embedding sent as JSON numbers reads back (as float32)");
    // update metadata: keys merge, a null value removes its key (the client
    // drops nulls before sending, so this is raw REST).
    r = await raw("POST", `${p}/update`, { ids: ["json-numbers"], metadatas: [{ via: null, more: 2 }] });
    check(r.status === 200, `update with a null metadata value: ${r.status} ${r.text}`);
    model.update(["json-numbers"], undefined, [{ via: null, more: 2 }]);
    r = await raw("POST", `${p}/get`, { ids: ["json-numbers"], include: ["metadatas"] });
    checkEq(r.json.metadatas, [{ more: 2 }], "metadata after an update that sets a key and removes another");
    r = await raw("GET", `${p}/count`);
    check(r.status === 200 && r.json === model.rows.size, `count is a bare number: ${r.text}, want ${model.rows.size}`);
    r = await raw("POST", `${p}/query`, { query_embeddings: [e], n_results: 1, include: ["distances"] });
    checkEq(r.json.ids, [["json-numbers"]], "raw query ids");
    check(Math.abs(r.json.distances[0][0]) < 1e-6, `distance to itself ${r.json.distances[0][0]}`);
    r = await raw("GET", `/tenants/default_tenant/databases/default_database/collections/no-such-collection-${tag}`);
    check(r.status === 404 && typeof r.json?.error === "string" && typeof r.json?.message === "string", `missing collection: want 404 {error, message}, got ${r.status} ${r.text}`);
    r = await raw("GET", `/tenants/default_tenant/databases/default_database/collections/by-id/${col.id}`);
    check(r.status === 200 && r.json.id === col.id, `collection by-id: ${r.status} ${r.text.slice(0, 200)}`);
    r = await raw("GET", "/tenants/default_tenant/databases/default_database/collections_count");
    check(r.status === 200 && Number.isInteger(r.json), `collections_count: ${r.text}`);
    r = await raw("POST", `${p}/get`, { include: ["bogus"] });
    check(r.status >= 400 && r.status < 500 && typeof r.json?.message === "string", `include [bogus]: want a 4xx {error, message}, got ${r.status} ${r.text}`);
  });

  await run("exactness where HNSW is approximate (uniform random in [-1, 1), 2,000 x 256, cosine)", async () => {
    const name = `umbra-uniform-${tag}`;
    const col = await client.createCollection({ name, embeddingFunction: null, configuration: { hnsw: { space: "cosine" } } });
    created.push(name);
    const model = new Model("cosine", 256);
    const centred = () => f32(Array.from({ length: 256 }, () => 2 * R.float() - 1));
    for (let b = 0; b < 4; b++) {
      const ids = [], embs = [];
      for (let i = 0; i < 500; i++) { ids.push(`u${b * 500 + i}`); embs.push(centred()); }
      await col.add({ ids, embeddings: embs });
      model.add(ids, embs);
    }
    const queries = Array.from({ length: 20 }, centred);
    const res = await col.query({ queryEmbeddings: queries, nResults: 10, include: ["distances"] });
    let rec = 0, inexact = 0, first = null;
    queries.forEach((q, i) => {
      rec += recall("cosine", q, model.rows, 10, res.ids[i]);
      const err = exactCheck("cosine", q, model.rows, 10, res.ids[i], res.distances[i]);
      if (err) { inexact++; first ??= `query ${i}: ${err}`; }
    });
    rec /= queries.length;
    console.log(`  uniform 2,000 x 256 cosine, k=10: recall ${rec.toFixed(3)}, ${inexact}/${queries.length} answers not exact`);
    if (reference) {
      checks++;
    } else {
      check(inexact === 0, () => `umbra must be exact: ${inexact} of ${queries.length} answers are not; first: ${first}`);
    }
  });

  await run("errors", async () => {
    const { col } = cols.cosine;
    await expectError("getCollection of a missing collection", ChromaNotFoundError, () => client.getCollection({ name: `missing-${tag}` }));
    await expectError("add with the wrong dimension", ChromaClientError, () => col.add({ ids: ["bad-dim"], embeddings: [[1, 2, 3]] }));
    check(/dimension/i.test(last.json?.message ?? ""), `wrong dimension: the message should name the dimension: ${last.text}`);
    await expectError("query with the wrong dimension", ChromaClientError, () => col.query({ queryEmbeddings: [[1, 2, 3]], nResults: 1 }));
    // Chroma fails a query whose ids name a record that does not exist
    // with a 500 (InternalError "Error finding id"): the client raises
    // ChromaServerError.
    await expectError("query with ids naming a missing record", ChromaServerError, () => col.query({ queryEmbeddings: [gaussVec(R, 16)], nResults: 3, ids: ["rec-1", `missing-${tag}`] }));
    // The client refuses a bad where itself; the server must too (400).
    const bad = await raw("POST", `/tenants/default_tenant/databases/default_database/collections/${col.id}/get`, { where: { n: { $bad: 1 } } });
    check(bad.status === 400 && bad.json?.error === "InvalidArgumentError", `get with where {n: {$bad: 1}}: want 400 InvalidArgumentError, got ${bad.status} ${bad.text}`);
    const badDoc = await raw("POST", `/tenants/default_tenant/databases/default_database/collections/${col.id}/get`, { where_document: { $nope: "x" } });
    check(badDoc.status === 400 && badDoc.json?.error === "InvalidArgumentError", `get with where_document {$nope: "x"}: want 400 InvalidArgumentError, got ${badDoc.status} ${badDoc.text}`);
    const gone = client.collection("00000000-0000-4000-8000-000000000000");
    await expectError("count of a collection id that does not exist", ChromaNotFoundError, () => gone.count());
    await expectError("add to a collection id that does not exist", ChromaNotFoundError, () => gone.add({ ids: ["a"], embeddings: [[1]] }));
  });

  await dropCollections();

  if (resetMode === "refused") {
    await run("reset refused", async () => {
      await expectError("reset without --allow-reset", ChromaForbiddenError, () => client.reset());
      check(last.status === 403, `reset: want 403, got ${last.status}`);
    });
  } else if (resetMode === "allowed") {
    await run("reset allowed", async () => {
      const tenant = `reset-tenant-${tag}`;
      await admin.createTenant({ name: tenant });
      await admin.createDatabase({ name: "reset-db", tenant });
      const c = await client.createCollection({ name: `reset-${tag}`, embeddingFunction: null });
      await c.add({ ids: ["a"], embeddings: [[1, 2]] });
      await client.reset();
      checkEq((await client.listCollections()).length, 0, "collections after reset");
      await expectError("getTenant after reset", ChromaNotFoundError, () => admin.getTenant({ name: tenant }));
      checkEq(await admin.getTenant({ name: "default_tenant" }), "default_tenant", "default_tenant survives reset");
      const db = await admin.getDatabase({ name: "default_database", tenant: "default_tenant" });
      checkEq(db.name, "default_database", "default_database survives reset");
      const after = await client.createCollection({ name: `after-reset-${tag}`, embeddingFunction: null });
      await after.add({ ids: ["b"], embeddings: [[3, 4]] });
      checkEq(await after.count(), 1, "a collection created after reset");
      await client.deleteCollection({ name: `after-reset-${tag}` });
    });
  }
}

try {
  await main();
  console.log(ran.map((l) => "  ok  " + l).join("\n"));
  console.log(`PASS: ${checks} checks in ${ran.length} sections against ${url} (seed ${seed})`);
} catch (e) {
  console.log(ran.map((l) => "  ok  " + l).join("\n"));
  if (e instanceof Failure) {
    console.error(`FAIL [${section}] ${e.message}\nlast exchange: ${lastExchange()}\nreplay: UMBRA_SEED=${seed}`);
  } else {
    console.error(`FAIL [${section}] unexpected ${e?.name}: ${e?.message}\n${e?.stack}\nlast exchange: ${lastExchange()}\nreplay: UMBRA_SEED=${seed}`);
  }
  await dropCollections().catch(() => {});
  process.exit(1);
}
