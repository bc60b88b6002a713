package storefile

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The version-2 fixtures: a base with meta and payloads and a log of op-6
// records, as the writer that introduced them wrote them. A later writer
// must produce the same bytes (the format is fixed once released), and a
// later reader must read them.
const (
	v2BaseFixturePath = "testdata/v2/base-genfeedface.umbra"
	v2LogFixturePath  = "testdata/v2/dim3-gen0123456789abcdef.log"
)

// v2LogFixtureRecords: one write of every flag combination, then the old
// ops, which a log holding op 6 still mixes in.
func v2LogFixtureRecords() []Record {
	var recs []Record
	for flags := range byte(16) {
		f := float32(flags)
		rec := Record{Op: OpWrite, IDs: []uint64{uint64(flags), 1 << 40}, Rows: []float32{f, -f, 0.5, 1, 2, 3}, Upsert: flags&writeUpsert != 0}
		if flags&writeKeys != 0 {
			rec.Keys = []string{"k", ""}
		}
		if flags&writeMeta != 0 {
			rec.Meta = [][]byte{{flags, 0xff}, nil}
		}
		if flags&writePayloads != 0 {
			rec.Payloads = [][]byte{nil, []byte(`{"n":1}`)}
		}
		recs = append(recs, rec)
	}
	return append(recs,
		Record{Op: OpAdd, IDs: []uint64{99}, Rows: []float32{9, 9, 9}},
		Record{Op: OpUpsertKeys, IDs: []uint64{99}, Rows: []float32{8, 8, 8}, Keys: []string{"ninety-nine"}},
		Record{Op: OpDelete, IDs: []uint64{1}})
}

func TestVersion2Fixtures(t *testing.T) {
	s, base := smallBaseV2(t)
	log := encodeLog(fuzzDim, fuzzGen, v2LogFixtureRecords())
	fixture, err := os.ReadFile(v2BaseFixturePath)
	require.NoError(t, err)
	require.True(t, bytes.Equal(fixture, base), "the version-2 base encoding changed")
	got, _, err := readBase(bytes.NewReader(fixture), int64(len(fixture)), "fixture")
	require.NoError(t, err)
	requireSameSnapshot(t, s, got)

	fixture, err = os.ReadFile(v2LogFixturePath)
	require.NoError(t, err)
	require.True(t, bytes.Equal(fixture, log), "the op-6 encoding changed")
	var recs []Record
	res, err := scanLog(bytes.NewReader(fixture), int64(len(fixture)), "fixture", fuzzDim, fuzzGen, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	require.NoError(t, err)
	require.False(t, res.torn)
	want := v2LogFixtureRecords()
	require.Len(t, recs, len(want))
	for i := range want {
		requireSameRecord(t, want[i], recs[i], "record %d", i)
	}
}
