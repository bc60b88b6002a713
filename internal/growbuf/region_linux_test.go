//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package growbuf

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOvercommitStrict: regions are refused only under strict overcommit
// accounting (mode 2), where a reservation is charged whole; modes 0 and
// 1, and a kernel without the file, keep them.
func TestOvercommitStrict(t *testing.T) {
	dir := t.TempDir()
	for mode, strict := range map[string]bool{"0\n": false, "1\n": false, "2\n": true, "2": true} {
		path := filepath.Join(dir, "overcommit_memory")
		require.NoError(t, os.WriteFile(path, []byte(mode), 0o600))
		require.Equal(t, strict, overcommitStrict(path), "mode %q", mode)
	}
	require.False(t, overcommitStrict(filepath.Join(dir, "absent")))
}

// resident reports, for each 4 KiB page of mem, whether it is present.
func resident(t *testing.T, mem []byte) []bool {
	t.Helper()
	vec := make([]byte, (len(mem)+4095)/4096)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestPrefaultMakesPagesPresent: Prefault faults in the pages of the
// elements it names (mincore says they were absent before and present
// after), leaves a page 2 MiB beyond them absent, changes no value, and
// does nothing on a nil or freed region; and a Free beside running
// prefaults neither deadlocks nor faults (that it waits for them, so no
// advice reaches memory mapped there next, is the lock's doing: an
// advice on unmapped memory only fails, and no test here could tell).
func TestPrefaultMakesPagesPresent(t *testing.T) {
	skipWithoutRegions(t)
	skipEmulated(t)
	const mib = 1 << 20
	s, reg := Floats(0, 16*mib/4)
	all := s[:cap(s)]
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(all))), len(all)*4)
	all[0] = 42
	before := resident(t, mem[4*mib:6*mib])
	require.NotContains(t, before, true, "the pages were present before any prefault: the test cannot tell")
	Prefault(reg, all, mib, 6*mib/4) // elements: bytes [4 MiB, 6 MiB)
	require.NotContains(t, resident(t, mem[4*mib:6*mib]), false, "a page Prefault named is not present")
	require.NotContains(t, resident(t, mem[10*mib:12*mib]), true, "Prefault made pages far past its range present")
	require.Equal(t, float32(42), all[0])
	for _, v := range all[mib : 6*mib/4] {
		require.Zero(t, v)
	}
	Prefault[float32](nil, all, 0, 10) // no region: nothing
	Prefault(reg, all, 5, 5)           // nothing to do

	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				Prefault(reg, all, (i%8)*mib/2, (i%8+4)*mib/2)
			}
		}()
	}
	time.Sleep(time.Millisecond)
	reg.Free()
	for range 4 {
		<-done
	}
	require.True(t, reg.Freed())
	Prefault(reg, all, 0, mib) // freed: nothing, and no fault
}
