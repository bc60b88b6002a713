package gpuplan

import (
	"fmt"
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// Chip is what an index's plan takes from its device: the adapter limits,
// the variant the probe chose, whether the fused path passed its
// self-test, the batch width, and the error a chunk plan's failure wraps.
type Chip struct {
	MaxStorageBindingBytes, MaxBufferBytes                 uint64
	MaxWorkgroupsPerDim, MaxInvocations, MaxWorkgroupBytes uint32
	Team                                                   uint32
	Staged, Subgroups, Fused                               bool
	BatchQT                                                uint32
	TooLarge                                               error
}

// IndexPlan is an index's layout: its chunks, its scores layouts for one
// query and for a batch, and (float32 rows on a fused device) the fused
// top-k plans for each.
type IndexPlan struct {
	Chunks        packed.ChunkPlan
	Single, Batch shaders.ScoresLayout
	// Gemm is gemm.wgsl's batch layout (float32 rows only; zero
	// otherwise).
	Gemm                  shaders.ScoresLayout
	TopKSingle, TopKBatch []shaders.TopKLayout
}

// PlanIndex lays out an index of rows of stride floats (or codes of prec)
// under metric on chip, compiling nothing.
func PlanIndex(stride int, metric core.Metric, prec core.Precision, maxChunkRows int, chip Chip) (IndexPlan, error) {
	plan, err := packed.PlanChunks(stride, packed.Limits{
		MaxStorageBindingBytes: chip.MaxStorageBindingBytes,
		MaxBufferBytes:         chip.MaxBufferBytes,
		MaxWorkgroupsPerDim:    chip.MaxWorkgroupsPerDim,
		MaxChunkRows:           maxChunkRows,
	})
	if err != nil {
		return IndexPlan{}, fmt.Errorf("%w: %v", chip.TooLarge, err)
	}
	target := shaders.Target{MaxInvocations: chip.MaxInvocations, MaxWorkgroupBytes: chip.MaxWorkgroupBytes,
		MaxTeam: chip.Team, StageQueries: chip.Staged}
	single, err := shaders.PlanScores(stride, metric, 1, target)
	if err != nil {
		return IndexPlan{}, err
	}
	batch, err := shaders.PlanScores(stride, metric, chip.BatchQT, target)
	if err != nil {
		return IndexPlan{}, err
	}
	single.Subgroups, batch.Subgroups = chip.Subgroups, chip.Subgroups
	if prec != core.F32 {
		// quant.wgsl reduces by its tree and reads its queries from
		// storage; it has no fused top-k.
		single.Prec, batch.Prec = prec, prec
		single.Subgroups, batch.Subgroups, batch.Slice = false, false, 0
	}
	p := IndexPlan{Chunks: plan, Single: single, Batch: batch}
	if prec == core.F32 {
		if p.Gemm, err = shaders.PlanGemm(stride, metric, target); err != nil {
			return IndexPlan{}, err
		}
	}
	if chip.Fused && prec == core.F32 {
		p.TopKSingle = shaders.TopKPlans(single, chip.MaxWorkgroupBytes)
		p.TopKBatch = shaders.TopKPlans(batch, chip.MaxWorkgroupBytes)
	}
	return p, nil
}

// FusedChecks are the fused self-test's k (5, then each plan's limit) and
// rows: more than twice the largest k, so the device selects.
func FusedChecks(single, batch []shaders.TopKLayout) (rows int, ks []int) {
	ks = []int{5}
	for _, p := range append(slices.Clone(single), batch...) {
		ks = append(ks, p.MaxK())
	}
	return 2*slices.Max(ks) + 90, ks
}
