// Package gpuplan holds the host-side logic both GPU backends share —
// internal/gpu (wgpu through cgo) and internal/webgpu (WebGPU in a
// browser): what one pass of a search is, how its dispatches and fused
// workgroups are planned, how read-back hits are decoded, and the data and
// checks of the self-test. It calls no GPU API and builds everywhere.
package gpuplan

import (
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/shaders"
	"github.com/umbravec/umbra/internal/topk"
)

// Submission is one pass of a search: NQ queries over the first Rows rows.
// With DeviceSelect the device selects each query's K best and only those
// are read back; otherwise every score is read back (K == 0 returns them
// as they are, K > 0 selects on the host, which is cheaper once K is half
// the rows: reading 4 bytes a row costs no more than 8 bytes a hit).
type Submission struct {
	NQ, K, Rows  int
	DeviceSelect bool
	// Fused, with DeviceSelect, scans and selects in one pass per chunk
	// (topk.wgsl) with Plan; Lists is the candidate lists per query that
	// pass leaves the merge (Groups workgroups per resident chunk).
	Fused         bool
	Plan          shaders.TopKLayout
	Groups, Lists int
	// Mask, when not nil, is a bitmap over rows (bit r of word r/64): only
	// those rows may be returned; K is then at most how many it holds.
	Mask []uint64
	// Tombs: the device's selection skips the rows marked in the resident
	// tombstones; K is at most the rows left.
	Tombs bool
	// Radix: the caller forced the radix select (WithSelectPath).
	Radix bool
}

// HitsPerQuery is the room each query needs in the hits buffer: K when the
// device selects, else one (the select bind group still names the buffer).
func (s Submission) HitsPerQuery() int {
	if s.DeviceSelect {
		return s.K
	}
	return 1
}

// DeviceSorted reports whether the device returns the hits sorted: the
// fused path always, the radix select for K up to shaders.SortLimit (its
// sort pass); the host sorts the rest.
func (s Submission) DeviceSorted() bool {
	return s.DeviceSelect && (s.Fused || s.K <= shaders.SortLimit)
}

// Path names the submission's selection for Stages.Path.
func (s Submission) Path() string {
	switch {
	case s.Fused:
		return "fused"
	case s.DeviceSelect:
		return "radix"
	case s.K > 0:
		return "host"
	}
	return "scores"
}

// ReadbackBytes is how many bytes the submission reads back: K hits a
// query when the device selects, else every score.
func (s Submission) ReadbackBytes() uint64 {
	if s.DeviceSelect {
		return uint64(s.NQ) * uint64(s.K) * shaders.HitBytes
	}
	return uint64(s.NQ) * uint64(s.Rows) * 4
}

// MaxK is the largest k the plans take (0 without plans).
func MaxK(plans []shaders.TopKLayout) uint32 {
	if len(plans) == 0 {
		return 0
	}
	return uint32(plans[len(plans)-1].MaxK())
}

// MaxGroups is a device's workgroups per grid dimension given the reported
// limit n, WebGPU's guaranteed 65,535 where none was reported.
func MaxGroups(n uint32) uint64 {
	if n != 0 {
		return uint64(n)
	}
	return 65535
}

// Grid returns the 2-D dispatch for a chunk of rows rows with layout l,
// at most maxGroups workgroups along x: as few rows of workgroups as the
// limit allows, each as short as covers the rows, so the grid has fewer
// workgroups past the chunk's end than it has rows of them (y - 1 at
// most). A grid of full rows of maxGroups would leave up to a whole row
// past the end: at NVIDIA's binding limit (699,050 rows of 768 a chunk),
// gemm.wgsl's 4 rows a workgroup (teams of 32) are 174,763 workgroups of
// work, and a 65,535 × 3 grid of them did 12.5% more (50% at teams of
// 16); now 58,255 × 3, 2 spare.
func Grid(rows int, l shaders.ScoresLayout, maxGroups uint64) (x, y uint32) {
	groups := max((uint64(rows)+uint64(l.Rows)-1)/uint64(l.Rows), 1)
	gy := (groups + maxGroups - 1) / maxGroups
	gx := (groups + gy - 1) / gy
	return uint32(gx), uint32(gy)
}

// SelectGroups is the x extent of the select shader's hist and compact
// dispatches: enough workgroups to keep a GPU busy, each striding over
// several rows.
func SelectGroups(rows int) uint32 {
	return uint32(min(max((rows+1023)/1024, 1), 1024))
}

// FusedPlan returns the plan (of single's for one query, batch's for more)
// whose limit covers k, if one does.
func FusedPlan(single, batch []shaders.TopKLayout, k, nq int) (shaders.TopKLayout, bool) {
	plans := single
	if nq > 1 {
		plans = batch
	}
	for _, p := range plans {
		if k <= p.MaxK() {
			return p, true
		}
	}
	return shaders.TopKLayout{}, false
}

// PlanFused sets sub on the fused path with plan p over chunks resident
// chunks of at most most rows: Groups workgroups per chunk, enough to fill
// a large GPU (512) for small K, fewer as K grows so the merge reads at
// most about 8,192 candidates per query (at least 16 lists, and no more
// than the chunk has steps of rows; 32 at most on a software adapter);
// capGroups > 0 caps them further (a self-test's).
func PlanFused(sub *Submission, p shaders.TopKLayout, most, chunks int, software bool, capGroups int) {
	sub.Fused, sub.Plan = true, p
	steps := (most + int(p.Step()) - 1) / int(p.Step())
	limit := 512
	if software {
		// A CPU adapter runs a few workgroups at a time and emulates each
		// barrier invocation by invocation: fewer, longer workgroups cut
		// their lists less often for the same rows.
		limit = 32
	}
	sub.Groups = max(min(steps, max(16, min(limit, 8192/sub.K))), 1)
	if capGroups > 0 {
		sub.Groups = min(sub.Groups, capGroups)
	}
	sub.Lists = sub.Groups * chunks
}

// Decode turns read-back (score bits, row) pairs, k a query, into
// best-first lists in the ordering every path shares. The fused path and,
// up to shaders.SortLimit, the radix select return them sorted; a larger
// k's hits come unordered (sort: sorting them is the host's only
// selection work).
func Decode(raw []byte, nq, k int, sort bool, m core.Metric) [][]core.Hit {
	out := make([][]core.Hit, nq)
	for q := range out {
		hs := make([]core.Hit, k)
		for i := range hs {
			score, row := shaders.DecodeHit(raw[(q*k+i)*shaders.HitBytes:])
			hs[i] = core.Hit{Score: score, Row: int(row)}
		}
		if sort {
			slices.SortFunc(hs, func(a, b core.Hit) int {
				if topk.Worse(b, a, m, nil) {
					return -1
				}
				return 1
			})
		}
		out[q] = hs
	}
	return out
}
