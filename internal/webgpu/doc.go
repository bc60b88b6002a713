// Package webgpu is umbra's backend for a browser's WebGPU (GOOS=js
// GOARCH=wasm), reached through syscall/js on navigator.gpu. It runs the
// very shaders internal/gpu runs through wgpu — the sources, variants, bind
// group layouts and binary layouts of package shaders — and keeps the same
// contract: every answer is the exact top k (checked by a self-test of the
// variant it uses before any search), ties by lower row, and any failure an
// error, never a wrong answer. It speaks internal/gpu's neutral types
// (Limits, Report, its error sentinels), so package engine wraps its Index
// as it wraps gpu.Index.
//
// WebGPU's asynchronous calls (requesting the adapter and device, error
// scopes, mapping a buffer) are awaited inside ordinary Go calls, which
// block their goroutine until the promise settles. A call must therefore
// not be made on the goroutine of a JavaScript callback (js.FuncOf), which
// holds the event loop: start a goroutine there.
//
// In other builds the package holds only this documentation.
package webgpu
