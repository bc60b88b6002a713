package storefile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMapBaseMatchesReadBase(t *testing.T) {
	r := newRand(t)
	path := filepath.Join(t.TempDir(), "m")
	for i := range 10 {
		s := randSnapshot(r)
		gen, err := WriteBase(path, s)
		require.NoError(t, err)
		m, err := MapBase(path)
		require.NoError(t, err, "snapshot %d", i)
		assert.Equal(t, gen, m.Generation)
		requireSameSnapshot(t, s, m.Snapshot, "snapshot %d", i)

		// A checkpoint renames a new file over the path; the mapping keeps
		// the old contents.
		_, err = WriteBase(path, randSnapshot(r))
		require.NoError(t, err)
		require.True(t, bytes.Equal(floatBytes(s.Rows), floatBytes(m.Rows)))
		require.NoError(t, m.Close())
		require.NoError(t, m.Close())
		assert.Nil(t, m.Rows)
	}
}

func TestMapBaseChecksRows(t *testing.T) {
	_, good := smallBase(t)
	path := filepath.Join(t.TempDir(), "m")
	for _, pos := range []int{rowsOffset, rowsOffset + 47, rowsOffset + 48, len(good) - 1, 30} {
		b := bytes.Clone(good)
		b[pos] ^= 0x80
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, err := MapBase(path)
		requireFormatError(t, err, nil, "flip at %d", pos)
	}
}
