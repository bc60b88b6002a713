package storefile

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// BenchmarkAppend appends records of 1,000 rows of 768 (what one Chroma
// add of a thousand embeddings logs), each made durable (fsync) before
// the next, as a store's default policy does.
func BenchmarkAppend(b *testing.B) {
	const n, dim = 1000, 768
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]float32, n*dim)
	for i := range rows {
		rows[i] = r.Float32()
	}
	l, err := OpenLog(OS, filepath.Join(b.TempDir(), "log"), dim, 1, SyncPolicy{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(int64(len(rows) * 4))
	id := uint64(0)
	for b.Loop() {
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = id
			id++
		}
		if err := l.Append(Record{Op: OpAdd, IDs: ids, Rows: rows}); err != nil {
			b.Fatal(err)
		}
	}
}
