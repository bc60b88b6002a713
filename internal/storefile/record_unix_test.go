//go:build unix

package storefile

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAppendRefusesRecordsOver4GiB: a write whose parts add up to more
// than a frame's length field holds is ErrInvalid, and nothing is
// written. The four 1 GiB payloads share one anonymous mapping that is
// never touched: address space, not memory.
func TestAppendRefusesRecordsOver4GiB(t *testing.T) {
	big, err := unix.Mmap(-1, 0, 1<<30, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skipf("no 1 GiB of address space to map: %v", err)
	}
	defer unix.Munmap(big)
	l, err := OpenLog(OS, filepath.Join(t.TempDir(), "s.log"), 3, 5, SyncEveryCall)
	require.NoError(t, err)
	defer l.Close()
	for _, rec := range []Record{
		{Op: OpWrite, IDs: []uint64{1, 2, 3, 4}, Rows: make([]float32, 12), Payloads: [][]byte{big, big, big, big}},
		{Op: OpWrite, IDs: []uint64{1, 2}, Rows: make([]float32, 6), Meta: [][]byte{big, big}, Payloads: [][]byte{big, big}},
	} {
		err = l.Append(rec)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "a record holds at most")
	}
	assert.Equal(t, int64(logHeaderLen), l.Size(), "nothing written")
}
