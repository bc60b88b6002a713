//go:build unix

package storefile

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const canMap = true

// mapRows maps the file up to the end of the rows section and verifies the
// rows' CRC. The rows start at a page boundary, so the float32 view is
// aligned.
func mapRows(f *os.File, h *baseHeader, name string) ([]float32, func() error, error) {
	e := h.table[0]
	data, err := unix.Mmap(int(f.Fd()), 0, int(e.offset+e.length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("storefile: map base %s: %w", name, err)
	}
	unmap := func() error { return unix.Munmap(data) }
	if err := checkSection(h, name, 0, data[e.offset:]); err != nil {
		_ = unmap()
		return nil, nil, err
	}
	rows := unsafe.Slice((*float32)(unsafe.Pointer(&data[e.offset])), e.length/4)
	return rows, unmap, nil
}
