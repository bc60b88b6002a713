package gpu

import (
	"fmt"
	"unsafe"

	"github.com/umbravec/umbra/internal/gpuplan"
)

// memLedger counts device memory: what is allocated now, the most it
// ever was, and the budget it may not pass (0: none).
type memLedger struct {
	used, peak, budget uint64
}

func (m *memLedger) add(n uint64) {
	m.used += n
	m.peak = max(m.peak, m.used)
}

// left is how many more bytes the budget allows (the most a uint64
// holds without one).
func (m *memLedger) left() uint64 {
	if m.budget == 0 {
		return ^uint64(0)
	}
	return m.budget - min(m.used, m.budget)
}

// The scratch cap: without a budget an index's scratch buffers (queries,
// scores, select state, hits, candidates, the read back...) together take
// at most an eighth of its rows' bytes, within [scratchFloor,
// scratchCeil]; a batch whose buffers would pass it is cut into more
// submissions, each still whole tiles where one fits. With a budget of
// rows, the cap is that of those rows, and the rows and the scratch
// together stay within the two.
const (
	scratchFloor = 16 << 20
	scratchCeil  = 1 << 30
)

// scratchCapFor is the scratch cap of rows bytes of rows.
func scratchCapFor(rows uint64) uint64 { return min(max(rows/8, scratchFloor), scratchCeil) }

// scratchCap is the most bytes the index's scratch may take now: the
// budget's when one is set, else that of the rows it holds.
func (g *Index) scratchCap() uint64 {
	if g.rowBudget > 0 {
		return scratchCapFor(g.rowBudget)
	}
	return scratchCapFor(g.rowCapBytes())
}

// rowCapBytes is the device memory the resident chunks' buffers take.
func (g *Index) rowCapBytes() uint64 {
	var n uint64
	for _, ch := range g.chunks {
		if ch.data != nil {
			n += ch.data.Bytes()
		}
		if ch.params != nil {
			n += ch.params.Bytes()
		}
	}
	return n
}

// SetBudget sets the most bytes of rows the index may hold on the device
// (the engine's MaxDeviceBytes; 0 or less: no budget). Everything the
// index allocates then stays within it plus its scratch cap: rows past it
// are ErrTooLarge, a chunk grows only as far as it allows, and searches
// are cut into submissions whose buffers fit. On a device that pages to
// host memory instead of failing (Windows' WDDM), it is the only bound.
func (g *Index) SetBudget(rows int64) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	g.rowBudget, g.mem.budget = 0, 0
	if rows > 0 {
		g.rowBudget = uint64(rows)
		g.mem.budget = g.rowBudget + scratchCapFor(g.rowBudget)
	}
	g.budgetShown.Store(g.mem.budget)
}

// alloc creates a buffer for the index, counted in its ledger and the
// device's; past the index's budget it is ErrTooLarge, before the API is
// asked. The caller holds the device mutex.
func (g *Index) alloc(label string, size uint64, usage gpuplan.Usage) (gpuplan.Buffer, error) {
	if size > g.mem.left() {
		return nil, fmt.Errorf("%w: %s needs %d bytes of device memory; the index holds %d of its budget of %d",
			ErrTooLarge, label, size, g.mem.used, g.mem.budget)
	}
	b, err := g.api().NewBuffer(label, size, usage)
	if err != nil {
		return nil, err
	}
	g.mem.add(b.Bytes())
	g.dev.mem.add(b.Bytes())
	return b, nil
}

// free releases a buffer alloc made (nil: nothing). The caller holds the
// device mutex.
func (g *Index) free(b gpuplan.Buffer) {
	if b == nil {
		return
	}
	g.mem.used -= min(b.Bytes(), g.mem.used)
	g.dev.mem.used -= min(b.Bytes(), g.dev.mem.used)
	g.api().Free(b)
}

// DeviceBytes is how much device memory the index holds now and the most
// it has held.
func (g *Index) DeviceBytes() (now, peak uint64) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	return g.mem.used, g.mem.peak
}

// bytesOf views a slice of 4- or 8-byte numbers as its bytes (every
// platform umbra's GPU path runs on is little-endian, as WGSL's storage
// is).
func bytesOf[T float32 | uint32 | uint64 | int32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// floatsOf views b (a multiple of 4 bytes, from make) as float32s.
func floatsOf(b []byte) []float32 {
	if len(b) == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}
