package gpuplan

import (
	"errors"
	"time"

	"github.com/umbravec/umbra/internal/shaders"
)

// The calls a GPU API gives the host-side driver (internal/gpu), and
// nothing more: buffers, queue writes, compute pipelines, one submission
// (a compute pass of dispatches, copies, and a read back of one mappable
// buffer), and error scopes. wgpu-native (internal/gpu/native) and the
// browser's WebGPU (internal/webgpu) each implement them; everything a
// search decides — submissions, scaling for flushing devices, masks,
// batch sizes, the device-memory budget, decoding — is the driver's,
// written once.

// Sentinels every backend's errors wrap (internal/gpu re-exports them).
var (
	// ErrFailed: a GPU call failed (validation, out of memory, a lost
	// device, a panic in a binding).
	ErrFailed = errors.New("wgpu")
	// ErrTooLarge: the data or the request does not fit the device's
	// limits or its memory budget.
	ErrTooLarge = errors.New("device limits")
)

// Buffer is one device buffer of an API: a handle only that API reads.
// It is a pointer, so it can key a map.
type Buffer interface {
	// Bytes is the buffer's size.
	Bytes() uint64
}

// Pipeline is one compiled compute pipeline of an API.
type Pipeline interface {
	// Label names it in errors.
	Label() string
}

// Usage is a buffer's usage: WebGPU's GPUBufferUsage bits, which
// wgpu-native's WGPUBufferUsage shares.
type Usage uint32

const (
	MapRead Usage = 0x1
	CopySrc Usage = 0x4
	CopyDst Usage = 0x8
	Vertex  Usage = 0x20
	Uniform Usage = 0x40
	Storage Usage = 0x80
)

// PipeSpec is one compute pipeline to build: an entry point of a WGSL
// source, with the bind group layout its bindings describe. Pipelines of
// one Layout name share that layout, so one bind group serves each of
// them.
type PipeSpec struct {
	Label, Source, Entry string
	Layout               string
	Bindings             []shaders.Binding
	// Subgroups: the source uses subgroup built-ins (WebGPU needs
	// `enable subgroups;` before it; wgpu-native's feature needs none).
	Subgroups bool
}

// Key identifies the pipeline a spec builds.
func (s PipeSpec) Key() string { return s.Entry + "\x00" + s.Source }

// Dispatch is one dispatch of a compute pass: a pipeline, the buffers
// bound to its bindings (in their order, each bound whole), and the grid.
type Dispatch struct {
	Pipe    Pipeline
	Buffers []Buffer
	X, Y, Z uint32
}

// Copy is a copy between two buffers on the device.
type Copy struct {
	Src       Buffer
	SrcOffset uint64
	Dst       Buffer
	DstOffset uint64
	Size      uint64
}

// Work is one submission: a compute pass of Pass's dispatches in order
// (none: no pass), then Copies in order, then, with Map, the first MapBytes
// bytes of Map (a MapRead buffer) read back once the work is done.
type Work struct {
	Pass   []Dispatch
	Copies []Copy
	Map    Buffer
	// MapBytes is how many bytes of Map are read back; with Time, Map
	// must hold StampRoom more past them (rounded up to 8) where the API
	// has timestamps.
	MapBytes uint64
	// Time asks for the pass's time on the GPU's clock, where the API
	// can write timestamps inside a pass.
	Time bool
	// Wait blocks until the work is done even without Map (an upload's
	// flush: the queued writes submitted and finished).
	Wait bool
}

// StampRoom is the room Work.Time needs in Map past the bytes read: two
// 64-bit timestamps.
const StampRoom = 16

// StampAt is where in Map the timestamps of a Work reading n bytes go.
func StampAt(n uint64) uint64 { return (n + 7) &^ 7 }

// Done is what a submission gives back.
type Done struct {
	// Data is a copy of the bytes read back.
	Data []byte
	// Kernel and Readback, for a traced submission: from the submission
	// until the work was done, and the map. Untraced, the map is the one
	// wait and neither is measured.
	Kernel, Readback time.Duration
	// GPU is the pass's time on the GPU's clock (Work.Time on an API
	// with timestamps; 0 otherwise).
	GPU time.Duration
}

// API is what a GPU API gives the driver. Its methods are called by one
// goroutine at a time (the driver's device lock); each turns a failure,
// a panic of its binding included, into an error wrapping ErrFailed (or
// ErrTooLarge).
type API interface {
	// NewBuffer creates a buffer of size bytes (a multiple of 4).
	NewBuffer(label string, size uint64, usage Usage) (Buffer, error)
	// Free releases a buffer (nil: nothing); it never fails.
	Free(b Buffer)
	// Write queues data into b at offset (both multiples of 4): it lands
	// before the work of any later Submit.
	Write(b Buffer, offset uint64, data []byte) error
	// Pipelines builds the pipelines of specs, once each per API (a
	// later call with the same spec returns the first's), all at once
	// where the API can build them in parallel.
	Pipelines(specs ...PipeSpec) ([]Pipeline, error)
	// Submit submits w; traced, it waits at the submission so Kernel and
	// Readback are measured apart.
	Submit(w Work, traced bool) (Done, error)
	// Scope runs f inside the API's validation and out-of-memory error
	// scopes and returns the first error f or a scope reports.
	Scope(what string, f func() error) error
}
