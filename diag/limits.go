package diag

import "time"

// Limits are the adapter limits and measured tuning an index's device side
// was planned against (engine.Info.Limits), or that the probe found on an
// adapter (AdapterReport.Limits).
type Limits struct {
	// The adapter's limits the plan respects: the largest storage binding
	// and buffer, workgroups per dimension, invocations and workgroup
	// memory per workgroup.
	MaxStorageBindingBytes uint64
	MaxBufferBytes         uint64
	MaxWorkgroupsPerDim    uint32
	MaxInvocations         uint32
	MaxWorkgroupBytes      uint32
	// MaxStorageBuffers is how many storage bindings one shader stage
	// may use (0: not known); a compressed search's device selection needs
	// seven.
	MaxStorageBuffers uint32
	// Subgroups is true when scores are reduced with subgroup shuffles.
	Subgroups bool
	// Timestamps is true when a traced search times its kernels with GPU
	// timestamps (KernelClock "gpu") rather than the wall clock.
	Timestamps bool
	// Team is how many invocations share one row in the scoring shader:
	// the fastest width the probe measured on this device, capped by the
	// row's vec4 count.
	Team uint32
	// StagedQueries is true when batches stage their queries in workgroup
	// memory on this device (measured faster by the probe).
	StagedQueries bool
	// FusedK and FusedBatchK are the largest k the fused scan-and-select
	// takes for one query and for a batch (one submission, a scan per chunk
	// and a merge; larger k takes the radix select). 0: the device did not
	// pass its fused self-test, or its workgroup memory holds no plan.
	FusedK, FusedBatchK uint32
	// GemmQueries is how many queries the register-tiled batch kernel
	// scores per pass over the rows (0: none planned), and Gemm whether
	// batches large enough take it on this device: it passed its
	// self-test and the probe measured it faster on a batch.
	GemmQueries uint32
	Gemm        bool
	// DeviceBudget is the most bytes of device memory the index's device
	// may allocate, its rows and every scratch buffer counted (0: no
	// budget; engine's Limits.MaxDeviceBytes sets it).
	DeviceBudget uint64
}

// VariantCheck is what the probe found for one variant of the kernels
// (AdapterReport.Checks): its self-test, and, where it passed, whether the
// probe's timings chose it and why.
type VariantCheck struct {
	// Kernel is "scores", "fused" or "gemm"; Variant names the
	// configuration ("team 32, subgroup reduction, direct batches").
	Kernel, Variant string
	// Passed: its self-test passed; Error says why not.
	Passed bool
	Error  string
	// Chosen: the device uses it. Why says why it was chosen or, having
	// passed, not (timings, or the probe stopped at a first pass).
	Chosen bool
	Why    string
	// Time is what the probe timed it at (0: not timed).
	Time time.Duration
}
