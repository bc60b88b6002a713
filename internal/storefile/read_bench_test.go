package storefile

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkReadBase sets reading a base file of 100,000×768 rows (what a
// GPU index's Open does: rows read into memory, every section's CRC
// checked) beside a plain read of the same file into fresh memory, both
// from the page cache. cmd/bench --store measures the engine's Open.
func BenchmarkReadBase(b *testing.B) {
	const n, dim = 100_000, 768
	r := rand.New(rand.NewPCG(1, 2))
	s := &Snapshot{Dim: dim, Stride: dim, IDs: make([]uint64, n), Rows: make([]float32, n*dim)}
	for i := range s.IDs {
		s.IDs[i] = uint64(i)
	}
	for i := range s.Rows {
		s.Rows[i] = r.Float32()
	}
	path := filepath.Join(b.TempDir(), "base")
	if _, err := WriteBase(OS, path, s); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	s = nil
	runtime.GC()
	b.Run("plain-read", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			buf, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			runtime.KeepAlive(buf)
		}
	})
	b.Run("ReadBase", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			got, _, err := ReadBase(path)
			if err != nil {
				b.Fatal(err)
			}
			runtime.KeepAlive(got)
		}
	})
}
