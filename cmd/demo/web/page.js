// The demo page: downloads and starts the wasm (which publishes
// window.umbra), shows each stage of the start-up as it happens (the
// wasm's bytes, then the stages the Go program reports with
// "umbra-progress" events), then what it runs on and the hits of a
// search.
"use strict";
const $ = id => document.getElementById(id);

// The start-up's stages, in the order they began: {stage, detail, t0, t1}.
const stages = [];
const labels = {
  download: "Downloading the program (main.wasm)",
  start: "Compiling and starting it",
  vectors: "Fetching the vectors",
  adapter: "WebGPU adapter",
  compile: "Building the self-test's GPU pipelines",
  "self-test": "Self-testing the shaders against the CPU",
  index: "Creating the index",
  upload: "Uploading the rows",
  search: "First search",
  ready: "Ready",
};

function secs(ms) { return (ms / 1000).toFixed(1) + " s"; }

function render(failed) {
  const ol = $("progress");
  stages.forEach((s, i) => {
    let li = ol.children[i];
    if (!li) {
      li = document.createElement("li");
      li.dataset.stage = s.stage;
      ol.appendChild(li);
    }
    const running = s.t1 === undefined && s.stage !== "ready";
    li.className = running ? (failed ? "failed" : "running") : "";
    const took = s.stage === "ready" ? "" : running ? " …" : ` (${secs(s.t1 - s.t0)})`;
    li.innerHTML = "";
    li.append(`${labels[s.stage] || s.stage}${s.detail ? ": " + s.detail : ""}`);
    const t = document.createElement("span");
    t.className = "t";
    t.textContent = took;
    li.append(t);
  });
}

// progress records that stage began (or, for the stage under way, its new
// detail).
function progress(stage, detail) {
  const now = performance.now();
  const last = stages[stages.length - 1];
  if (last && last.stage === stage) {
    last.detail = detail;
  } else {
    if (last) last.t1 = now;
    stages.push({stage, detail, t0: now});
  }
  render(false);
}
window.addEventListener("umbra-progress", e => progress(e.detail.stage, e.detail.detail));

function failed(msg) {
  $("status").className = "error";
  $("status").textContent = msg;
  render(true);
}

// loadWasm fetches main.wasm, counting its bytes as they arrive, and
// compiles it while it streams (the server sends application/wasm).
async function loadWasm(go) {
  progress("download", "");
  const resp = await fetch("main.wasm");
  if (!resp.ok) throw new Error(`main.wasm: HTTP ${resp.status} ${resp.statusText}`);
  const total = Number(resp.headers.get("Content-Length")) || 0;
  const mb = n => (n / 1e6).toFixed(1) + " MB";
  let got = 0, shown = 0;
  const counted = resp.body.pipeThrough(new TransformStream({
    transform(chunk, ctrl) {
      got += chunk.byteLength;
      const now = performance.now();
      if (now - shown > 100 || got === total) {
        shown = now;
        progress("download", total ? `${mb(got)} of ${mb(total)}` : mb(got));
      }
      ctrl.enqueue(chunk);
    },
  }));
  const r = await WebAssembly.instantiateStreaming(
    new Response(counted, {headers: {"Content-Type": "application/wasm"}}), go.importObject);
  progress("start", "");
  return r.instance;
}

async function start() {
  const go = new Go();
  const instance = await loadWasm(go);
  go.run(instance).then(() => failed("umbra's Go program exited; reload the page"));
  const info = await window.umbra.ready;
  const s = $("status");
  if (info.backend === "gpu") {
    s.className = "gpu";
    s.textContent = `On the GPU through WebGPU: ${info.adapter}. ${info.rows} × ${info.dim} vectors (${info.source}) indexed in ${secs(info.loadMs)}.`;
  } else {
    s.className = "cpu";
    s.textContent = `Fell back to the CPU (wasm): ${info.reason || "no GPU"}. ${info.rows} × ${info.dim} vectors (${info.source}) indexed in ${secs(info.loadMs)}.`;
  }
  $("row").max = info.rows - 1;
  $("go").disabled = false;
  search();
}
start().catch(e => failed("umbra failed to start: " + (e && e.message || e)));

// search runs the form's query; a bad row or k (or any other error) is
// shown beside the button and the last hits are cleared.
async function search() {
  const took = $("took");
  took.className = "";
  const t0 = performance.now();
  try {
    const q = window.umbra.row(Number($("row").value));
    const hits = await window.umbra.search(q, Number($("k").value));
    took.textContent = `${(performance.now() - t0).toFixed(1)} ms on the ${window.umbra.info().backend.toUpperCase()}`;
    $("hits").tBodies[0].innerHTML = hits.map((h, i) =>
      `<tr><td>${i + 1}</td><td>${h.id}</td><td>${h.score.toFixed(6)}</td></tr>`).join("");
  } catch (e) {
    took.className = "error";
    took.textContent = "search failed: " + (e && e.message || e);
    $("hits").tBodies[0].innerHTML = "";
  }
}
$("go").addEventListener("click", search);
