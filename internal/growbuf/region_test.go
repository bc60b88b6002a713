package growbuf

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestFloatsSmallIsHeap: below regionMin a buffer is an ordinary slice,
// with no region.
func TestFloatsSmallIsHeap(t *testing.T) {
	r := testkit.Rand(t)
	n := r.IntN(regionMin / 4)
	s, reg := Floats(n/2, n)
	require.Nil(t, reg)
	require.Equal(t, n/2, len(s))
	require.Equal(t, n, cap(s))
	reg.Free() // a nil region frees nothing
}

// TestFloatsRegion: a large buffer lies in a region reserving
// regionGrowth times its capacity, zero past its length, writable to its
// capacity; Free unmaps it once, however often it is called.
func TestFloatsRegion(t *testing.T) {
	skipWithoutRegions(t)
	r := testkit.Rand(t)
	capacity := regionMin/4 + r.IntN(1<<20)
	length := r.IntN(capacity)
	before := Mapped()
	s, reg := Floats(length, capacity)
	require.NotNil(t, reg)
	require.Equal(t, before+1, Mapped())
	require.Equal(t, length, len(s))
	require.GreaterOrEqual(t, cap(s), max(regionGrowth*capacity, regionReserve/4))
	require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(s)))%4096, "a region starts on a page")
	all := s[:cap(s)]
	for i := 0; i < len(all); i += 1 + r.IntN(4096) {
		require.Zero(t, all[i])
		all[i] = float32(i)
	}
	for i := 0; i < len(all); i += 1 + r.IntN(4096) {
		require.True(t, all[i] == 0 || all[i] == float32(i))
	}
	require.False(t, reg.Freed())
	reg.Free()
	require.True(t, reg.Freed())
	require.Equal(t, before, Mapped())
	reg.Free()
	require.Equal(t, before, Mapped())
}

// TestRegionOnHugePages: the kernel holds a region eligible for
// transparent huge pages (its smaps entry says THPeligible 1) wherever
// they are enabled for advised memory.
func TestRegionOnHugePages(t *testing.T) {
	skipWithoutRegions(t)
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): a region uses small pages", strings.TrimSpace(string(mode)), err)
	}
	skipEmulated(t)
	s, reg := Floats(0, regionMin/4)
	defer reg.Free()
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, found := false, false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 { // a mapping's first line
			in = lo <= start && start < hi
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			found = true
			require.Equal(t, "1", strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")), "the region's mapping is not eligible for huge pages")
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, found, "no smaps entry with THPeligible for the region at %#x", start)
}

// skipEmulated skips t under a user-mode emulator (qemu-aarch64 in CI),
// where madvise never reaches the kernel: the kernel's own architecture
// names it.
func skipEmulated(t *testing.T) {
	t.Helper()
	if arch, err := os.ReadFile("/proc/sys/kernel/arch"); err == nil {
		native := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
		if k := strings.TrimSpace(string(arch)); native != "" && k != native {
			t.Skipf("this %s binary runs emulated on the %s kernel: its madvise never reaches the kernel", runtime.GOARCH, k)
		}
	}
}

// TestUnreachableRegionIsFreed: a region dropped without Free (a buffer
// abandoned on an error path) is unmapped by the garbage collector.
func TestUnreachableRegionIsFreed(t *testing.T) {
	skipWithoutRegions(t)
	_, reg := Floats(0, regionMin/4)
	st := reg.st
	reg = nil
	require.Eventually(t, func() bool {
		runtime.GC()
		return st.freed.Load()
	}, 10*time.Second, 10*time.Millisecond, "an unreachable region is still mapped")
}

// skipWithoutRegions skips where every buffer is heap memory: another
// system, a 32-bit one, or strict overcommit accounting.
func skipWithoutRegions(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Skipf("no regions on %s/%s (strict overcommit: %v): every buffer is heap memory (TestFloatsSmallIsHeap)", runtime.GOOS, runtime.GOARCH, strictOvercommit())
	}
}
