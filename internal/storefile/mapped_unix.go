//go:build unix

package storefile

import (
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

const canMap = true

// mapRows maps the file up to the end of the rows section, private and
// copy-on-write, and verifies the rows' CRC. The rows start at a page
// boundary, so the float32 view is aligned. It returns the mapping's
// address range.
//
// A file truncated while its rows are checked makes the check fault; the
// fault is turned into ErrTruncated rather than a crash.
func mapRows(f *os.File, h *baseHeader, name string) (_ []float32, _, _ uintptr, _ func() error, err error) {
	e := h.table[0]
	data, err := unix.Mmap(int(f.Fd()), 0, int(e.offset+e.length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("map base %s: %w", name, err)
	}
	unmap := func() error { return unix.Munmap(data) }
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			_ = unmap()
			err = formatErr(name, "rows", int64(e.offset), ErrTruncated, "the mapped file shrank while its rows were checked: %v", r)
		}
	}()
	if err := checkSection(h, name, 0, data[e.offset:]); err != nil {
		_ = unmap()
		return nil, 0, 0, nil, err
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	rows := unsafe.Slice((*float32)(unsafe.Pointer(&data[e.offset])), e.length/4)
	return rows, start, start + uintptr(len(data)), unmap, nil
}

// changeStamp is f's status-change time (st_ctim) in seconds and
// nanoseconds, and its link count. Every write and every change of the
// file's times sets the first to the current time, and no system call sets
// it to another, so a rewrite that restores the file's size and
// modification time still moves it. Unlinking the file (a checkpoint's
// rename over its path) moves it too, and changes the link count.
func changeStamp(f *os.File) ([3]int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return [3]int64{}, err
	}
	return [3]int64{int64(st.Ctim.Sec), int64(st.Ctim.Nsec), int64(st.Nlink)}, nil
}
