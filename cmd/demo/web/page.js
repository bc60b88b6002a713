// The demo page: starts the wasm (which publishes window.umbra), then
// shows what it runs on and the hits of a search.
"use strict";
const $ = id => document.getElementById(id);
const go = new Go();
WebAssembly.instantiateStreaming(fetch("main.wasm"), go.importObject).then(r => {
  go.run(r.instance);
  return window.umbra.ready;
}).then(info => {
  const s = $("status");
  if (info.backend === "gpu") {
    s.className = "gpu";
    s.textContent = `On the GPU through WebGPU: ${info.adapter}. ${info.rows} × ${info.dim} vectors (${info.source}) indexed in ${info.loadMs.toFixed(0)} ms.`;
  } else {
    s.className = "cpu";
    s.textContent = `Fell back to the CPU (wasm): ${info.reason || "no GPU"}. ${info.rows} × ${info.dim} vectors (${info.source}) indexed in ${info.loadMs.toFixed(0)} ms.`;
  }
  $("go").disabled = false;
  search();
}).catch(e => {
  $("status").className = "error";
  $("status").textContent = "umbra failed to start: " + e;
});

async function search() {
  const q = window.umbra.row(Number($("row").value));
  if (!q) { $("took").textContent = "no such row"; return; }
  const t0 = performance.now();
  try {
    const hits = await window.umbra.search(q, Number($("k").value));
    $("took").textContent = `${(performance.now() - t0).toFixed(1)} ms on the ${window.umbra.info().backend.toUpperCase()}`;
    $("hits").tBodies[0].innerHTML = hits.map((h, i) =>
      `<tr><td>${i + 1}</td><td>${h.id}</td><td>${h.score.toFixed(6)}</td></tr>`).join("");
  } catch (e) {
    $("took").textContent = "search failed: " + e;
  }
}
$("go").addEventListener("click", search);
