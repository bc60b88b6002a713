package engine

import (
	"fmt"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
)

// Info says how an index computes and, when it fell back to the CPU, why and
// how to fix it.
type Info struct {
	// Device is the path that serves searches: GPU or CPU (never Auto).
	Device Device
	// Adapter is the GPU the index was created on; it stays set after a
	// GPU failure moved it to the CPU (Device CPU, Reason says why), and
	// is zero when it never had one. The limits and kernel variants its
	// device side was planned with are what `umbra probe --json` reports
	// for that adapter.
	Adapter diag.AdapterInfo
	Chunks  int // device buffers the slab occupies
	// DeviceRows is how many rows the device holds: all of them, unless
	// Limits.Overflow keeps the rows past Limits.MaxDeviceBytes on the CPU.
	DeviceRows int
	ChunkRows  int    // rows per device buffer
	CPUKernel  string // the fallback's dot-product kernel, e.g. "avx2+fma", "neon"
	// Precision is the index's storage precision; QuantKernel names the
	// CPU's kernel set for compressed rows, e.g. "avx512vnni", "avx2+f16c",
	// "neon+dotprod" or "generic" (empty under F32).
	Precision   umbra.Precision
	QuantKernel string
	// Reason says why the fallback serves searches under Device Auto
	// (empty when the GPU does, or when Device CPU was asked for).
	Reason string
	// Hint says what a user can do about Reason.
	Hint umbra.Hint
	// Recoveries counts the times a failed GPU came back under Device
	// Auto (the device passed its self-test again, or a new one was
	// opened, and every row was uploaded again); LastFailure is the GPU
	// failure that moved searches to the CPU last, kept after a recovery.
	Recoveries  int
	LastFailure string
	// Routing is set under Device Auto on a GPU: what was measured, once
	// per process, to send each search to the faster path for its shape,
	// in words: where one query starts going to the GPU, the GPU's
	// latency and scan rate, the CPU's scan rate and what each further
	// query of a batch costs it.
	Routing string
	// Shards, of a sharded index (several Config.Adapters), says where the rows are: each shard's
	// adapter and the rows it holds (Adapter is then the first shard's, Chunks and DeviceRows those of all together).
	Shards []ShardInfo
	// DeadRows is how many deleted rows the index still holds: a delete
	// only marks its rows, which keep their memory and scan time (and
	// their place in a store's base file) until Compact reclaims them.
	DeadRows int
}

// ShardInfo is one shard of an index sharded over several Config.Adapters: its adapter and
// the contiguous rows [Start, Start+Rows) it holds.
type ShardInfo struct {
	Adapter diag.AdapterInfo
	Start   int
	Rows    int
}

// String says in a line or two where searches run, on what, and why.
func (i Info) String() string {
	var b strings.Builder
	if i.Adapter.Name == "" {
		fmt.Fprintf(&b, "cpu (pure Go, %s kernel)", i.CPUKernel)
	} else {
		fmt.Fprintf(&b, "%s on %s, %s", i.Device, i.Adapter, i.Adapter.Driver)
		if i.Chunks > 0 {
			fmt.Fprintf(&b, "; %d device buffer(s) of up to %d rows", i.Chunks, i.ChunkRows)
		}
		if len(i.Shards) > 0 {
			fmt.Fprintf(&b, "; %d shards:", len(i.Shards))
			for n, s := range i.Shards {
				if n > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " %s holds %d rows from row %d", s.Adapter, s.Rows, s.Start)
			}
		}
		if i.Device == CPU {
			fmt.Fprintf(&b, "; searches on the pure-Go path (%s kernel)", i.CPUKernel)
		}
	}
	if i.Precision != umbra.F32 {
		fmt.Fprintf(&b, "; precision %v (%s kernel), exact float32 answers", i.Precision, i.QuantKernel)
	}
	if i.Reason != "" {
		fmt.Fprintf(&b, "\nwhy: %s", i.Reason)
	}
	if i.Hint.Code != "" {
		fmt.Fprintf(&b, "\nfix: %s", i.Hint)
	}
	if i.Routing != "" {
		fmt.Fprintf(&b, "\nrouting: %s", i.Routing)
	}
	return b.String()
}

// Info reports the backend, the adapter and, for a fallback, why.
func (ix *Index) Info() Info {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	info := Info{
		Device:    CPU,
		CPUKernel: fallback.Kernel(),
		Precision: ix.cfg.Precision,
		DeadRows:  ix.rid.nDead,
	}
	if ix.quant.c != nil {
		info.QuantKernel = exact.QuantKernel()
	}
	if ix.dev != nil {
		info.Adapter = ix.dev.Adapter()
		info.ChunkRows = ix.dev.ChunkRows()
		info.DeviceRows = ix.deviceRows(ix.slab.Rows)
		info.Chunks = (info.DeviceRows + info.ChunkRows - 1) / info.ChunkRows
		if sh, ok := ix.dev.(*shards); ok {
			info.Shards, info.Chunks = sh.info(info.DeviceRows), 0
			for i, s := range info.Shards {
				c := sh.parts[i].dev.ChunkRows()
				info.Chunks += (s.Rows + c - 1) / c
			}
		}
		if ix.onGPU() {
			info.Device = GPU
		}
		if ix.route != nil {
			info.Routing = ix.route.String()
		}
	}
	ix.whyMu.Lock()
	info.Reason, info.Hint, info.LastFailure = ix.reason, ix.hint, ix.lastFailure
	ix.whyMu.Unlock()
	info.Recoveries = int(ix.recoveries.Load())
	return info
}
