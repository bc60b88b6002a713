package diag

import "github.com/umbravec/umbra/internal/gpu"

// Limits are the adapter limits and measured tuning an index's device side
// was planned against (engine.Info.Limits), or that the probe found on an
// adapter: binding and buffer sizes, workgroup limits, whether subgroups
// and timestamps are used, the team width and query staging the probe
// measured fastest, and the largest k the fused scan-and-select takes
// (FusedK for one query, FusedBatchK for a batch; 0 when the device did
// not pass its fused self-test).
type Limits = gpu.Limits

// VariantCheck is what the probe found for one variant of the kernels
// (AdapterReport.Checks): its self-test, and, where it passed, whether the
// probe's timings chose it and why.
type VariantCheck = gpu.VariantCheck
