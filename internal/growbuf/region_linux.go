//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package growbuf

import (
	"errors"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

const haveRegions = true

// errStrict refuses regions under strict overcommit accounting.
var errStrict = errors.New("strict overcommit accounting (vm.overcommit_memory 2): a reservation would be charged whole")

// strictOvercommit reports whether the kernel charges every writable
// private mapping in full against its commit limit (vm.overcommit_memory
// 2), MAP_NORESERVE or not. There a region's reservation would take commit
// charge it never uses, and enough of them would make the kernel refuse
// other allocations (the Go runtime's own among them): buffers stay on
// the heap. Read once per process.
var strictOvercommit = sync.OnceValue(func() bool { return overcommitStrict("/proc/sys/vm/overcommit_memory") })

// overcommitStrict reports whether the overcommit mode in the file at path
// is 2 (strict accounting).
func overcommitStrict(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) == "2"
}

// mapRegion reserves bytes of address space, committing no memory
// (MAP_NORESERVE), advised onto transparent huge pages. The advice is
// best effort: a kernel without them refuses it and the region uses small
// pages.
func mapRegion(bytes int) ([]byte, error) {
	if strictOvercommit() {
		return nil, errStrict
	}
	mem, err := unix.Mmap(-1, 0, bytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, nil
}

func unmapRegion(mem []byte) error { return unix.Munmap(mem) }

// populate faults mem's pages in for writing (MADV_POPULATE_WRITE); a
// kernel before 5.14 refuses the advice, and nothing happens.
func populate(mem []byte) { _ = unix.Madvise(mem, unix.MADV_POPULATE_WRITE) }
