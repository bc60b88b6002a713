package storefile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The version-1 base fixture: a base file written by the version-1 writer
// (before bases carried meta and payloads sections), kept byte for byte so
// that later writers are held to producing exactly it for a snapshot
// without meta or payloads, and later readers to reading it.
const (
	v1BaseFixturePath = "testdata/v1/base-gen0badc0ffee0ddf00.umbra"
	v1BaseFixtureGen  = 0x0badc0ffee0ddf00
)

// v1BaseFixtureSnapshot is what the fixture holds: every version-1 section
// non-empty, a tombstone word boundary crossed, an empty key, a precision
// other than 0, NaN and infinity bit patterns among the rows.
func v1BaseFixtureSnapshot() *Snapshot {
	r := rand.New(rand.NewPCG(21, 1))
	const n, dim, stride = 70, 5, 8
	s := &Snapshot{Dim: dim, Stride: stride, Metric: 3, Precision: PrecisionFloat16, NextID: 1 << 33,
		IDs: make([]uint64, n), Rows: randFloats(r, n*stride), Deleted: make([]uint64, 2),
		Keys: map[uint64]string{0: "", 7: "seven", 1 << 62: "\x00\xff big"}}
	for i := range s.IDs {
		s.IDs[i] = r.Uint64() >> r.IntN(64)
	}
	s.Deleted[0], s.Deleted[1] = 1<<63|1<<3, 1<<5
	return s
}

// TestVersion1BaseFixture: a snapshot without meta or payloads is still
// written as the version-1 writer wrote it, byte for byte (so stores that
// do not use them stay readable by older builds), and the fixture reads
// back as that snapshot.
func TestVersion1BaseFixture(t *testing.T) {
	want := v1BaseFixtureSnapshot()
	fixture, err := os.ReadFile(v1BaseFixturePath)
	require.NoError(t, err)
	require.True(t, bytes.Equal(fixture, encodeBaseBytes(t, want, v1BaseFixtureGen)), "a snapshot without meta or payloads no longer encodes as version 1 did")
	got, gen, err := readBase(bytes.NewReader(fixture), int64(len(fixture)), "fixture")
	require.NoError(t, err)
	require.Equal(t, uint64(v1BaseFixtureGen), gen)
	requireSameSnapshot(t, want, got)
}
