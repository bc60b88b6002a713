package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/probe"
	"github.com/umbravec/umbra/meta"
)

// Device chooses where an index computes.
type Device int

const (
	// Auto probes the GPU adapters once per process and uses the best
	// discrete or integrated one that works; a software (CPU-type) adapter
	// or any failure selects the pure-Go fallback, with the reason in Info.
	Auto Device = iota
	// GPU requires a working adapter of any type, software ones included,
	// and fails with the probe's reason instead of falling back.
	GPU
	// CPU uses the pure-Go fallback and never touches wgpu.
	CPU
)

func (d Device) String() string {
	switch d {
	case Auto:
		return "auto"
	case GPU:
		return "gpu"
	case CPU:
		return "cpu"
	}
	return fmt.Sprintf("Device(%d)", int(d))
}

// ParseDevice accepts "auto", "gpu" or "cpu" (any case).
func ParseDevice(s string) (Device, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return Auto, nil
	case "gpu":
		return GPU, nil
	case "cpu":
		return CPU, nil
	}
	return 0, fmt.Errorf("%w: unknown device %q (want auto, gpu or cpu)", umbra.ErrInvalidConfig, s)
}

// AdapterSelect narrows which adapters the GPU path may use.
type AdapterSelect struct {
	// LowPower puts integrated GPUs first; by default discrete GPUs come
	// first (on a hybrid laptop, the NVIDIA card rather than the
	// integrated one).
	LowPower bool
	// Name, when set, keeps only adapters whose name, vendor or driver
	// description contains it (case-insensitive).
	Name string
	// Backend, when set, keeps only adapters of that graphics API:
	// "vulkan", "metal", "dx12" or "gl".
	Backend string
}

func (s AdapterSelect) validate() error {
	switch strings.ToLower(s.Backend) {
	case "", "vulkan", "metal", "dx12", "gl":
	default:
		return fmt.Errorf("%w: unknown backend %q (want vulkan, metal, dx12 or gl)", umbra.ErrInvalidConfig, s.Backend)
	}
	return nil
}

// Config describes an index. The zero value of every field but Dim is a
// sensible default.
type Config struct {
	Dim    int          // vector dimension, at least 1
	Metric umbra.Metric // Cosine by default
	// Precision is how the copy of the vectors that searches scan is
	// held: F32 (the default), F16 or Int8. Answers are the exact float32
	// ones at every precision (see Precision). A store keeps its own: Open
	// takes the store's, and refuses another non-zero one.
	Precision umbra.Precision
	// Fields declares metadata fields and their kinds ahead of the first
	// row that has them (optional: a field's kind is otherwise fixed by
	// the first value stored for it). A store keeps every field it has
	// known; a declared one must agree with it.
	Fields map[string]meta.Kind
	// Device is where the index computes: Auto by default. Under CPU the
	// fields only a GPU reads (an Adapters entry other than the zero
	// selection, Isolate, ProbeTimeout,
	// Limits.MaxDeviceBytes, Limits.Overflow) are refused with
	// umbra.ErrInvalidConfig naming them, not ignored.
	Device Device
	// Adapters picks the GPU adapters the index runs on. Empty: the best
	// working adapter (Device GPU admits software ones, Auto does not).
	// One entry: the best working adapter that matches it. Several: the
	// rows are sharded, one device side per entry, each holding a
	// contiguous segment of the rows sized by the adapter's measured scan
	// rate; a search runs on every shard at once and merges their answers
	// exactly (ties by lower ID, as everywhere), and any shard failing
	// fails the GPU call as a whole (under Auto the CPU answers and
	// recovery rebuilds every shard). Two entries may pick the same
	// adapter (two device sides on it: a test of the split, no faster).
	// Shards cannot be combined with Limits.Overflow, Isolate, a Precision
	// other than F32 or Device CPU. Info.Shards says where the rows are.
	Adapters []AdapterSelect
	// Workers is the number of goroutines the CPU path searches with and
	// an Add or Upsert of many rows packs them with (a streamed Add: one
	// reads while the others pack); 0 means GOMAXPROCS.
	Workers int
	// ProbeTimeout bounds the GPU probe (device creation, shader
	// compilation, one test dispatch); 0 means 30 s.
	ProbeTimeout time.Duration
	// Isolate runs the index's GPU work in a child process (this program
	// run again; see engine's package documentation): a failure inside
	// the GPU driver or wgpu-native that would end a process ends only
	// the child. The call that meets it returns ErrGPU, which under Auto
	// is answered by the CPU, and the index starts a new child in the
	// background. It costs a second host copy of the rows (in the child)
	// and a pipe crossing per call. The program must call
	// ServeGPUChildIfRequested at the top of its main, which is where the
	// child serves.
	Isolate  bool
	Limits   Limits   // how much the index may hold; none by default
	Coalesce Coalesce // how concurrent single searches share a pass

	// ReadOnly makes Open open the existing store at its path for
	// searching only. It takes no lock, so it works while another process
	// has the store open for writing, and it never changes the store's
	// files: a torn tail of the log is read past, not cut off. Every write
	// — Add, Upsert, Delete, Compact, Checkpoint — returns ErrReadOnly.
	//
	// The index holds the store as it was while Open read it: the base
	// file, and every log record that was complete by the time the replay
	// reached it (a record a writer is appending is either whole or left
	// out, never half applied). It does not follow later writes; open
	// again to see them. If a writer checkpoints while the store is being
	// read (a new base replaces the one read, and the log restarts), the
	// read starts over, up to a few times, so the result is never the old
	// base without the log that had extended it; a store checkpointed
	// faster than it can be read is ErrLocked.
	ReadOnly bool
	// LogSync is how a store Open opens for writing makes its log
	// durable. 0 (the default) fsyncs it inside every write call, so an
	// acknowledged write survives a power loss; a positive interval
	// acknowledges a write once the operating system has it and fsyncs
	// within that interval, so a power loss (not a process crash) can lose
	// the writes of the last interval, and never corrupts the store.
	LogSync time.Duration
}

// Limits caps what an index holds, so that running out of memory is an
// error value, not the process's end. Zero fields mean no cap.
type Limits struct {
	// MaxRows caps how many vectors the index accepts; an Add fails with
	// ErrTooLarge beyond it, before allocating.
	MaxRows int
	// MaxHostBytes and MaxDeviceBytes cap the bytes the packed rows may
	// take in host memory (every row is kept there) and in device memory
	// (under a compressed precision the device holds only the codes: Dim
	// rounded up to 64 bytes a row for Int8, to 32 halves for F16). An Add
	// or Upsert that would pass either fails with ErrTooLarge before it
	// allocates, and nothing is stored.
	MaxHostBytes   int64
	MaxDeviceBytes int64
	// Overflow, with MaxDeviceBytes, keeps the rows past the device's
	// budget on the CPU instead of refusing them (Device GPU) or moving
	// every search to the CPU (Auto): the device holds the first
	// MaxDeviceBytes of rows (a multiple of 64 rows, at least 64), the CPU
	// the rest, and a search runs both at once and merges them exactly.
	Overflow bool
	// MaxPayloadBytes caps one row's payload (WithPayloads); 0 means
	// DefaultMaxPayloadBytes (1 MiB). Payload and metadata bytes count
	// against MaxHostBytes.
	MaxPayloadBytes int
	// Meta bounds each row's metadata and the distinct values a field
	// may take (meta.Limits; zero fields take its defaults), so that
	// hostile metadata costs bounded memory and gets a clear error.
	Meta meta.Limits
}

// Coalesce says how single searches that arrive while another is running
// are answered together: one device pass (or, on the CPU, one read of the
// rows) serves the whole batch, each caller getting exactly its own
// answer. A search that finds the index idle never waits.
type Coalesce struct {
	// MaxQueries is the most searches one pass answers; 0 means 256, 1
	// turns coalescing off. The default was chosen by measurement (cmd/bench
	// --concurrency --coalesce-max, 50,000×768 on the CPU): at 256 callers
	// a cap of 256 answered about 3× the searches per second of a cap of 64
	// and 4× a cap of 16, and at 64 callers it did no worse.
	MaxQueries int
	// Wait is how long a batch that is not yet full waits for more
	// searches, once searches are queueing; 0 means no wait: the batch is
	// whatever queued while the previous one ran.
	Wait time.Duration
}

// adapter is the one adapter selection of an unsharded index (the zero
// selection when Adapters is empty).
func (c Config) adapter() AdapterSelect {
	if len(c.Adapters) == 1 {
		return c.Adapters[0]
	}
	return AdapterSelect{}
}

// shards is the adapter list of a sharded index, nil otherwise.
func (c Config) shards() []AdapterSelect {
	if len(c.Adapters) > 1 {
		return c.Adapters
	}
	return nil
}

// defaultBatchQueries is Coalesce.MaxQueries' default (see Coalesce).
const defaultBatchQueries = 256

const defaultProbeTimeout = probe.DefaultTimeout

func (c Config) validate() error {
	if c.Dim <= 0 || c.Dim > umbra.MaxDim {
		return fmt.Errorf("%w: Dim must be between 1 and %d, got %d", umbra.ErrInvalidConfig, umbra.MaxDim, c.Dim)
	}
	switch c.Metric {
	case umbra.Cosine, umbra.Dot, umbra.L2:
	default:
		return fmt.Errorf("%w: unknown metric %d", umbra.ErrInvalidConfig, c.Metric)
	}
	switch c.Device {
	case Auto, GPU, CPU:
	default:
		return fmt.Errorf("%w: unknown device %d", umbra.ErrInvalidConfig, c.Device)
	}
	if c.Workers < 0 || c.ProbeTimeout < 0 || c.Limits.MaxRows < 0 || c.Limits.MaxHostBytes < 0 || c.Limits.MaxDeviceBytes < 0 ||
		c.Limits.MaxPayloadBytes < 0 || c.Coalesce.MaxQueries < 0 || c.Coalesce.Wait < 0 {
		return fmt.Errorf("%w: Workers, ProbeTimeout, Limits.MaxRows, Limits.MaxHostBytes, Limits.MaxDeviceBytes, Limits.MaxPayloadBytes, Coalesce.MaxQueries and Coalesce.Wait must not be negative", umbra.ErrInvalidConfig)
	}
	if len(c.Fields) > 0 {
		mi := metaindex.NewIndex(c.Limits.Meta.WithDefaults())
		for name, kind := range c.Fields {
			if err := mi.Declare(name, kind); err != nil {
				return fmt.Errorf("%w: Fields: %v", umbra.ErrInvalidConfig, err)
			}
		}
	}
	if err := c.validatePrecision(); err != nil {
		return err
	}
	if err := c.validateCPU(); err != nil {
		return err
	}
	return c.validateShards()
}

// validateCPU refuses, under Device CPU, the fields that only a GPU reads,
// rather than ignoring them: the CPU path probes no adapter, starts no
// child and holds no device memory.
func (c Config) validateCPU() error {
	if c.Device != CPU {
		return nil
	}
	var field string
	switch {
	case slices.ContainsFunc(c.Adapters, func(s AdapterSelect) bool { return s != AdapterSelect{} }):
		field = "Adapters (no adapter is used)"
	case c.Isolate:
		field = "Isolate (no GPU work to isolate)"
	case c.ProbeTimeout != 0:
		field = "ProbeTimeout (no adapter is probed)"
	case c.Limits.MaxDeviceBytes != 0:
		field = "Limits.MaxDeviceBytes (no device memory is used; Limits.MaxHostBytes caps the rows)"
	case c.Limits.Overflow:
		field = "Limits.Overflow (every row is on the CPU already)"
	default:
		return nil
	}
	return fmt.Errorf("%w: Device CPU with %s", umbra.ErrInvalidConfig, field)
}

// validateShards checks each adapter selection, and refuses shards (several
// Adapters) with what they do not support.
func (c Config) validateShards() error {
	for i, s := range c.Adapters {
		if err := s.validate(); err != nil {
			return fmt.Errorf("adapter %d: %w", i, err)
		}
	}
	if len(c.Adapters) < 2 {
		return nil
	}
	var with string
	switch {
	case c.Device == CPU:
		with = "Device CPU"
	case c.Limits.Overflow:
		with = "Limits.Overflow"
	case c.Isolate:
		with = "Isolate"
	case c.Precision != umbra.F32:
		with = "precision " + c.Precision.String()
	}
	if with != "" {
		return fmt.Errorf("%w: several Adapters (shards) cannot be combined with %s", umbra.ErrInvalidConfig, with)
	}
	return nil
}
