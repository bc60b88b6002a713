//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package growbuf

import "golang.org/x/sys/unix"

const haveRegions = true

// mapRegion reserves bytes of address space, committing no memory
// (MAP_NORESERVE: under strict overcommit accounting the kernel counts it
// anyway, and a refusal sends the buffer to the heap), advised onto
// transparent huge pages. The advice is best effort: a kernel without them
// refuses it and the region uses small pages.
func mapRegion(bytes int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, bytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, nil
}

func unmapRegion(mem []byte) error { return unix.Munmap(mem) }
