// Package native is wgpu-native (through cgo and the
// github.com/oliverbestmann/webgpu binding) as the API internal/gpu's
// driver runs on (gpuplan.API): the instance and its adapters, a device
// with the adapter's own limits and the features umbra uses, buffers,
// queue writes, pipelines with explicit bind group layouts, bind groups
// cached per set of buffers, one submission with its read back, GPU
// timestamps inside a pass, and the error scopes the binding does not
// wrap. It decides nothing about a search. Builds without cgo (or with
// the nogpu tag) have none of it.
package native
