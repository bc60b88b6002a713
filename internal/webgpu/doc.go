// Package webgpu is a browser's WebGPU (GOOS=js GOARCH=wasm), reached
// through syscall/js on navigator.gpu, as an API internal/gpu's driver
// runs on (gpuplan.API: buffers, queue writes, pipelines, one submission
// and its read back, error scopes), and the page's probe. Everything a
// search decides — its submissions, the scaling that keeps a device that
// flushes subnormals exact, masks, batch sizes, decoding, the self-tests
// — is the driver's, the same code the wgpu backend runs, so package
// engine uses the browser's device as it uses wgpu's.
//
// WebGPU's asynchronous calls (requesting the adapter and device, error
// scopes, mapping a buffer) are awaited inside ordinary Go calls, which
// block their goroutine until the promise settles. A call must therefore
// not be made on the goroutine of a JavaScript callback (js.FuncOf), which
// holds the event loop: start a goroutine there.
//
// In other builds the package holds only this documentation.
package webgpu
