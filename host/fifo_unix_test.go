//go:build unix

package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// fifoWith makes a named pipe at path and feeds it b from a goroutine, as a
// shell's process substitution would. The returned channel yields the
// writer's error once it is done.
func fifoWith(t *testing.T, path string, b []byte) <-chan error {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = f.Write(b)
		f.Close()
		done <- err
	}()
	return done
}

// TestFIFOLyingHeaders: through a FIFO no size is known; a lying fvecs dim
// costs what actually arrived, and an npy shape beyond the cap is refused
// before its payload is read.
func TestFIFOLyingHeaders(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()

	const sent = 8 << 20
	payload := make([]byte, sent)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	// A dim under the cap (2 GiB of values) over 8 MiB: costs what arrived.
	path := filepath.Join(dir, "lie.fvecs")
	done := fifoWith(t, path, append(binary.LittleEndian.AppendUint32(nil, 1<<29), payload...))
	var err error
	alloc := allocatedDuring(func() { _, err = ReadMatrixFile(t.Context(), path) })
	require.NoError(t, <-done)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "vector 0 truncated")
	assert.Contains(t, err.Error(), "got 8388608")
	assert.Less(t, alloc, uint64(2*sent+(8<<20)), "allocated %d bytes for %d that arrived", alloc, sent)

	// A dim over the cap (8 GiB of values): refused before reading on.
	path = filepath.Join(dir, "huge.fvecs")
	done = fifoWith(t, path, append(binary.LittleEndian.AppendUint32(nil, math.MaxInt32), payload[:4096]...))
	alloc = allocatedDuring(func() { _, err = ReadMatrixFile(t.Context(), path) })
	<-done // the writer may see EPIPE: the reader stopped early, as it should
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Less(t, alloc, uint64(8<<20))

	path = filepath.Join(dir, "lie.npy")
	done = fifoWith(t, path, append(numpyNPYBytes(1, "<f4", []int64{1 << 40, 1 << 10}), payload[:4096]...))
	alloc = allocatedDuring(func() { _, err = ReadMatrixFile(t.Context(), path) })
	<-done // the writer may see EPIPE: the reader stopped early, as it should
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), path)
	assert.Less(t, alloc, uint64(8<<20))

	// A good file through a FIFO loads, trailing-data check included.
	m := wideMatrix(rng, 30, 17)
	path = filepath.Join(dir, "good.fvecs")
	done = fifoWith(t, path, fvecsBytes(17, m.Data))
	got, err := ReadMatrixFile(t.Context(), path)
	require.NoError(t, <-done)
	require.NoError(t, err)
	assertSameBits(t, m.Data, got.Data)
}

// TestMatrixReaderFIFO: through a FIFO the row count is not known (-1),
// and the rows still arrive whole and checked to the end.
func TestMatrixReaderFIFO(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()
	m := wideMatrix(rng, 300, 9)
	var npy bytes.Buffer
	require.NoError(t, writeNPY(&npy, m, "<f2"))
	want, err := readNPYFrom(context.Background(), bytes.NewReader(npy.Bytes()))
	require.NoError(t, err)
	for name, b := range map[string][]byte{"p.npy": npy.Bytes(), "p.fvecs": fvecsBytes(9, m.Data)} {
		path := filepath.Join(dir, name)
		done := fifoWith(t, path, b)
		r, err := OpenMatrixFile(context.Background(), path)
		require.NoError(t, err)
		require.Equal(t, -1, r.Rows())
		got, err := readRowsInPieces(t, r, 17)
		require.NoError(t, err)
		require.NoError(t, <-done)
		if name == "p.npy" {
			assertSameBits(t, want.Data, got)
		} else {
			assertSameBits(t, m.Data, got)
		}
		require.NoError(t, r.Close())
	}
}
