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
