package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/umbravec/umbra/internal/core"
)

// Metric is the similarity an index ranks by: Cosine, Dot or L2.
type Metric = core.Metric

const (
	// Cosine ranks by cosine similarity (higher is better). Vectors and
	// queries are normalised on the host, so a zero vector is rejected.
	Cosine = core.Cosine
	// Dot ranks by the inner product (higher is better).
	Dot = core.Dot
	// L2 ranks by squared Euclidean distance (lower is better); Hit.Score
	// is the squared distance.
	L2 = core.L2
)

// ParseMetric accepts "cosine", "dot" or "l2" (any case).
func ParseMetric(s string) (Metric, error) {
	if m, ok := core.ParseMetric(s); ok {
		return m, nil
	}
	return 0, fmt.Errorf("%w: unknown metric %q (want cosine, dot or l2)", ErrInvalidConfig, s)
}

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
	return 0, fmt.Errorf("%w: unknown device %q (want auto, gpu or cpu)", ErrInvalidConfig, s)
}

// Power is the adapter power preference.
type Power int

const (
	// HighPerformance prefers a discrete GPU: on a hybrid laptop, the
	// NVIDIA card rather than the integrated one.
	HighPerformance Power = iota
	// LowPower prefers an integrated GPU.
	LowPower
)

// AdapterSelect narrows which adapters the GPU path may use.
type AdapterSelect struct {
	Power Power
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
		return fmt.Errorf("%w: unknown backend %q (want vulkan, metal, dx12 or gl)", ErrInvalidConfig, s.Backend)
	}
	if s.Power != HighPerformance && s.Power != LowPower {
		return fmt.Errorf("%w: unknown power preference %d", ErrInvalidConfig, s.Power)
	}
	return nil
}

// Config describes an index. The zero value of every field but Dim is a
// sensible default.
type Config struct {
	Dim     int    // vector dimension, at least 1
	Metric  Metric // Cosine by default
	Device  Device // Auto by default
	Adapter AdapterSelect
	// Workers is the number of goroutines the fallback searches with and
	// an Add, AddFlat or Upsert of many rows packs them with (AddFrom:
	// one reads while the others pack); 0 means GOMAXPROCS.
	Workers int
	// ProbeTimeout bounds the GPU probe (device creation, shader
	// compilation, one test dispatch); 0 means 30 s.
	ProbeTimeout time.Duration
	// LogSync is how a store opened with Open makes its log durable: 0
	// fsyncs it inside every write call, so an acknowledged write survives
	// a power loss; a positive duration acknowledges a write once the
	// operating system has it and fsyncs within that time, so a power loss
	// (not a process crash) can lose the writes of the last LogSync, and
	// never corrupts the store.
	LogSync time.Duration
	// MaxRows, when non-zero, caps how many vectors the index accepts;
	// Add fails with ErrTooLarge beyond it, before allocating.
	MaxRows int
	// MaxHostBytes and MaxDeviceBytes, when non-zero, cap the bytes the
	// packed rows may take in host memory (every row is kept there) and
	// in device memory (under a compressed precision the device holds only
	// the codes: Dim rounded up to 64 bytes a row for Int8, to 32 halves
	// for F16). An Add or Upsert that would pass either fails with
	// ErrTooLarge before it allocates, and nothing is stored: running out
	// of memory is then an error value, not the process's end.
	MaxHostBytes   int64
	MaxDeviceBytes int64
	// BatchQueries is the most concurrent single searches one device pass
	// (or, on the CPU, one read of the rows) answers together: searches
	// that arrive while another is running are coalesced, each caller
	// getting exactly its own answer. 0 means DefaultBatchQueries; 1 turns
	// coalescing off.
	BatchQueries int
	// BatchWait is how long a batch that is not yet full waits for more
	// searches, once searches are queueing (a search that finds the index
	// idle never waits). 0 means no wait: the batch is whatever queued
	// while the previous one ran.
	BatchWait time.Duration
	// Overflow, with MaxDeviceBytes, keeps the rows past the device's
	// budget on the CPU instead of refusing them (Device GPU) or moving
	// every search to the CPU (Auto): the device holds the first
	// MaxDeviceBytes of rows (a multiple of 64 rows, at least 64), the
	// fallback the rest, a search runs both at once and merges them
	// exactly.
	Overflow bool
	// Isolate runs the index's GPU work in a child process (this program
	// run again; see engine's package documentation): a failure inside
	// the GPU driver or wgpu-native that would end a process ends only
	// the child. The call that meets it returns ErrGPU, which under Auto
	// is answered by the fallback, and the index starts a new child in
	// the background. It costs a second host copy of the rows (in the
	// child) and a pipe crossing per call. The program must call
	// ServeGPUChildIfRequested at the top of its main, which is where
	// the child serves.
	Isolate bool
	// Precision is how the copy of the vectors that searches scan is
	// held: F32 (the default), F16 or Int8. Answers are the exact float32
	// ones at every precision (see Precision). A store keeps its own: Open
	// takes the store's precision, not this field's.
	Precision Precision
	// Shards, when set, spreads the rows over several adapters instead of
	// the one Adapter picks: each entry picks one adapter as Adapter would
	// (the best working one that matches; Device GPU admits software
	// ones), a device side is opened on each, and each holds a contiguous
	// segment of the rows, sized by the adapter's measured scan rate. A
	// search runs on every shard at once and merges their answers exactly
	// (ties by lower ID, as everywhere); any shard failing fails the GPU
	// call as a whole (under Auto the fallback answers, and recovery
	// rebuilds every shard). Two entries may pick the same adapter (two
	// device sides on it: a test of the split, no faster). Shards cannot
	// be combined with Adapter, Overflow, Isolate, a Precision other than
	// F32 or Device CPU. Info.Shards says where the rows are.
	Shards []AdapterSelect
}

// DefaultBatchQueries is Config.BatchQueries' default, chosen by
// measurement (cmd/bench --concurrency --coalesce-max, 50,000×768 on the
// fallback): at 256 callers a cap of 256 answered about 3× the searches per
// second of a cap of 64 and 4× a cap of 16, at 64 callers it did no worse,
// and a search that finds the index idle runs alone whatever the cap.
const DefaultBatchQueries = 256

const defaultProbeTimeout = 30 * time.Second

// MaxDim is the largest vector dimension an index accepts: 16,777,216
// components, 64 MiB a vector, far past any embedding model, and small
// enough that every size computed from it (a row, a batch of queries, a
// device binding) stays exact in 64-bit arithmetic.
const MaxDim = 1 << 24

func (c Config) validate() error {
	if c.Dim <= 0 || c.Dim > MaxDim {
		return fmt.Errorf("%w: Dim must be between 1 and %d, got %d", ErrInvalidConfig, MaxDim, c.Dim)
	}
	switch c.Metric {
	case Cosine, Dot, L2:
	default:
		return fmt.Errorf("%w: unknown metric %d", ErrInvalidConfig, c.Metric)
	}
	switch c.Device {
	case Auto, GPU, CPU:
	default:
		return fmt.Errorf("%w: unknown device %d", ErrInvalidConfig, c.Device)
	}
	if c.Workers < 0 || c.MaxRows < 0 || c.ProbeTimeout < 0 || c.MaxHostBytes < 0 || c.MaxDeviceBytes < 0 ||
		c.BatchQueries < 0 || c.BatchWait < 0 {
		return fmt.Errorf("%w: Workers, MaxRows, ProbeTimeout, MaxHostBytes, MaxDeviceBytes, BatchQueries and BatchWait must not be negative", ErrInvalidConfig)
	}
	if err := c.validatePrecision(); err != nil {
		return err
	}
	if err := c.validateShards(); err != nil {
		return err
	}
	return c.Adapter.validate()
}

// validateShards refuses Shards with what they do not support.
func (c Config) validateShards() error {
	if len(c.Shards) == 0 {
		return nil
	}
	var with string
	switch {
	case c.Device == CPU:
		with = "Device CPU"
	case c.Adapter != (AdapterSelect{}):
		with = "Adapter (name each shard's adapter in Shards)"
	case c.Overflow:
		with = "Overflow"
	case c.Isolate:
		with = "Isolate"
	case c.Precision != F32:
		with = "precision " + c.Precision.String()
	}
	if with != "" {
		return fmt.Errorf("%w: Shards cannot be combined with %s", ErrInvalidConfig, with)
	}
	for i, s := range c.Shards {
		if err := s.validate(); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}
