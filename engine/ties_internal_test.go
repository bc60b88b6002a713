package engine

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// rankingDevice answers Search as a device does — the exact top k of its
// scores by score, then row, k capped at the allowed rows — and records
// the k of each request. Any other device call panics.
type rankingDevice struct {
	device
	scores [][]float32 // per query
	m      core.Metric
	asks   []int
}

func (d *rankingDevice) Search(_ context.Context, qs [][]float32, k, rows int, mask []uint64, _ *core.Stages) ([][]core.Hit, error) {
	d.asks = append(d.asks, k)
	out := make([][]core.Hit, len(qs))
	for i, q := range qs {
		out[i] = topk.SelectAllowed(d.scores[int(q[0])][:rows], k, d.m, mask)
	}
	return out, nil
}

// The rows' order: IDs increasing with the row are ordered, and an append
// or a store's direct load that breaks the order is not, until a truncate
// drops the rows that broke it.
func TestRowIDsOrder(t *testing.T) {
	m := newRowIDs()
	if !m.ordered() || m.tieIDs() != nil {
		t.Fatal("an empty map is ordered")
	}
	m.appendIDs([]uint64{1, 2, 7})
	m.appendIDs([]uint64{8})
	if !m.ordered() {
		t.Fatal("increasing IDs are ordered")
	}
	m.appendIDs([]uint64{3, 9})
	if m.ordered() || len(m.tieIDs()) != 6 {
		t.Fatal("an ID below its predecessor is not ordered")
	}
	m.appendIDs([]uint64{10})
	if m.ordered() {
		t.Fatal("a later append does not restore the order")
	}
	m.truncate(5)
	if m.ordered() {
		t.Fatal("the row that broke the order is still there")
	}
	m.truncate(4)
	if !m.ordered() {
		t.Fatal("the rows that broke the order are gone")
	}
	m.ids = append(m.ids, 20, 30) // as a store's load sets them
	if m.ordered() {
		t.Fatal("IDs set outside appendIDs are not known ordered")
	}
	m.appendIDs([]uint64{40})
	if !m.ordered() {
		t.Fatal("the next append looks at every row past the ordered ones")
	}
}

// deviceTopK asks a device ranking by row for k+1 hits, and for more only
// while the tie at rank k reaches the last hit, and returns the top k by
// score, then ID: here with runs of equal scores of every length at every
// rank, random IDs and filters.
func TestDeviceTopKTies(t *testing.T) {
	r := testkit.Rand(t)
	for trial := range 300 {
		m := []core.Metric{core.Dot, core.L2}[trial%2]
		n := 1 + r.IntN(300)
		nq := 1 + r.IntN(3)
		dev := &rankingDevice{m: m, scores: make([][]float32, nq)}
		for q := range dev.scores {
			levels := 1 + r.IntN(8)
			dev.scores[q] = make([]float32, n)
			for i := range dev.scores[q] {
				dev.scores[q][i] = float32(r.IntN(levels))
			}
		}
		ix := emptyIndex(Config{Dim: 1, Metric: umbra.Dot})
		if m == fallback.L2 {
			ix.cfg.Metric = umbra.L2
		}
		ix.dev = dev
		ids := make([]uint64, n)
		for i, v := range r.Perm(3 * n)[:n] {
			ids[i] = uint64(v)
		}
		if r.IntN(4) == 0 {
			slices.Sort(ids)
		}
		ix.rid.appendIDs(ids)
		var mask []uint64
		if r.IntN(3) == 0 {
			mask = make([]uint64, (n+63)/64)
			for i := range n {
				if r.IntN(3) != 0 {
					mask[i/64] |= 1 << (i % 64)
				}
			}
		}
		qs := make([][]float32, nq)
		for q := range qs {
			qs[q] = []float32{float32(q)}
		}
		k := 1 + r.IntN(n+2)
		got, err := ix.deviceTopK(context.Background(), qs, k, n, mask, nil)
		if err != nil {
			t.Fatal(err)
		}
		for q := range qs {
			var want []core.Hit
			for row, s := range dev.scores[q] {
				if mask == nil || mask[row/64]&(1<<(row%64)) != 0 {
					want = append(want, core.Hit{Row: row, Score: s})
				}
			}
			slices.SortFunc(want, func(a, b core.Hit) int {
				if a.Score != b.Score {
					if m == fallback.L2 {
						return cmp.Compare(a.Score, b.Score)
					}
					return cmp.Compare(b.Score, a.Score)
				}
				return cmp.Compare(ids[a.Row], ids[b.Row])
			})
			want = want[:min(k, len(want))]
			if !slices.Equal(got[q], want) {
				t.Fatalf("trial %d (%v, n %d, k %d, query %d): got %v\nwant %v", trial, m, n, k, q, got[q], want)
			}
		}
		switch {
		case ix.rid.ordered() && !slices.Equal(dev.asks, []int{k}):
			t.Fatalf("trial %d: ordered IDs asked for %v, want k=%d alone", trial, dev.asks, k)
		case !ix.rid.ordered() && dev.asks[0] != min(k+1, max(k, n)):
			t.Fatalf("trial %d: first ask %d for k=%d of %d rows", trial, dev.asks[0], k, n)
		}
	}
}
