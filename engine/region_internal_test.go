package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/growbuf"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestSlabRegionsFreedWhenReplaced: an index whose rows outgrow the heap
// fills a reserved region in place and, each time it outgrows one, frees
// the old one the moment the write that moved its rows publishes them
// (not when the garbage collector next runs), while searches from other
// goroutines go on reading: a region unmapped under a reader would fault
// and crash the process. A compaction's new slab frees the old one too,
// and Close the last. Every search is exact throughout.
func TestSlabRegionsFreedWhenReplaced(t *testing.T) {
	if !growbuf.Available() {
		t.Skipf("no regions on %s/%s: the rows grow on the heap, as TestConcurrentSearchAndAdd tests", runtime.GOOS, runtime.GOARCH)
	}
	precs := []umbra.Precision{umbra.F32, umbra.Int8}
	if !testkit.Whole() { // the README's command and CI's race run: one, the seed's
		precs = precs[testkit.Rand(t).IntN(len(precs)):][:1]
	}
	for _, prec := range precs {
		t.Run(prec.String(), func(t *testing.T) { testRegionsFreed(t, prec) })
	}
}

// regionTrail is the regions a buffer of the index lay in, one after
// another.
type regionTrail struct {
	name string
	seen []*growbuf.Region
}

// note records reg (nil: the heap) and checks that every region before it
// was freed as it was replaced.
func (rt *regionTrail) note(t *testing.T, reg *growbuf.Region) {
	t.Helper()
	if reg == nil || len(rt.seen) > 0 && rt.seen[len(rt.seen)-1] == reg {
		return
	}
	for _, old := range rt.seen {
		require.True(t, old.Freed(), "a replaced region of the %s is still mapped after the Add that replaced it", rt.name)
	}
	rt.seen = append(rt.seen, reg)
}

func testRegionsFreed(t *testing.T, prec umbra.Precision) {
	defer growbuf.ReserveForTests(1)() // four times what is asked, not a gigabyte
	r := testkit.Rand(t)
	const dim, batch, k = 512, 2048, 5
	// 64 Ki rows of 2 KiB: 128 MiB, past a 4 MiB heap slab and through
	// at least two regions (each reserves four times what it held); their
	// int8 codes, 32 MiB, into one.
	rows := 64 << 10
	ix, err := New(context.Background(), Config{Dim: dim, Metric: umbra.L2, Device: CPU, Precision: prec})
	require.NoError(t, err)
	defer ix.Close()
	data := testkit.Matrix(r, rows, dim)
	queries := testkit.Vectors(r, 4, dim)

	var published atomic.Int64 // rows whose Add returned
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				lo := int(published.Load())
				q := queries[(g+i)%len(queries)]
				hits, err := ix.Search(context.Background(), q, k)
				hi := int(published.Load()) + batch // an Add may publish meanwhile
				if err == nil {
					err = prefixTopK(data, dim, q, k, hits, lo, min(hi, rows))
				}
				if err != nil {
					errs <- fmt.Errorf("searcher %d, search %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	rowsTrail, codesTrail := &regionTrail{name: "rows"}, &regionTrail{name: "codes"}
	regions := func() (rows, codes *growbuf.Region) {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		if ix.quant.c != nil {
			codes = ix.quant.c.Region()
		}
		return ix.slab.Region(), codes
	}
	for lo := 0; lo < rows; lo += batch {
		_, err := ix.Add(context.Background(), umbra.Flat(data[lo*dim:(lo+batch)*dim], dim))
		require.NoError(t, err)
		published.Store(int64(lo + batch))
		rr, cr := regions()
		rowsTrail.note(t, rr)
		codesTrail.note(t, cr)
		require.False(t, rr == nil && (lo+batch)*dim*4 > 64<<20, "the rows passed 64 MiB on the heap")
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.GreaterOrEqual(t, len(rowsTrail.seen), 2, "the rows never outgrew their first region")
	if prec == umbra.Int8 {
		require.NotEmpty(t, codesTrail.seen, "32 MiB of codes on the heap")
	}

	// Deleting a third compacts (a quarter and 1,024 rows dead) into a
	// new slab; the old regions go with it.
	var dead []uint64
	for id := uint64(0); id < uint64(rows); id += 3 {
		dead = append(dead, id)
	}
	require.NoError(t, ix.Delete(context.Background(), umbra.WithIDs(dead...)))
	for _, trail := range []*regionTrail{rowsTrail, codesTrail} {
		for _, reg := range trail.seen {
			require.True(t, reg.Freed(), "a region of the %s that compaction replaced is still mapped", trail.name)
		}
	}
	compacted, compactedCodes := regions()
	require.NotNil(t, compacted, "the compacted rows (85 MiB) are on the heap")
	for _, q := range queries {
		hits, err := ix.Search(context.Background(), q, k)
		require.NoError(t, err)
		require.NoError(t, exactTopK(data, dim, q, k, hits, func(id int) bool { return id%3 != 0 }, rows))
	}
	require.NoError(t, ix.Close())
	require.True(t, compacted.Freed(), "Close left the rows' region mapped")
	if compactedCodes != nil {
		require.True(t, compactedCodes.Freed(), "Close left the codes' region mapped")
	}
}

// prefixTopK checks that hits are the exact L2 top k of a prefix of
// data that was published during the search: at least lo rows (published
// before it began), at most hi (an Add may publish meanwhile). It checks
// the first n rows, n just past the largest hit's ID (or lo): the top k
// of a longer prefix whose hits all lie below n are the top k of the
// first n rows too.
func prefixTopK(data []float32, dim int, q []float32, k int, hits []umbra.Hit, lo, hi int) error {
	n := lo
	for _, h := range hits {
		n = max(n, int(h.ID)+1)
	}
	if n > hi {
		return fmt.Errorf("hit ID %d past the %d rows added", n-1, hi)
	}
	if lo >= k && len(hits) != k {
		return fmt.Errorf("%d hits, want %d", len(hits), k)
	}
	return exactTopK(data, dim, q, k, hits, func(int) bool { return true }, n)
}

// exactTopK checks hits against the float64 L2 ranking of the rows below n
// that keep admits (random data: no ties).
func exactTopK(data []float32, dim int, q []float32, k int, hits []umbra.Hit, keep func(int) bool, n int) error {
	type scored struct {
		id int
		d  float64
	}
	var best []scored
	for id := range n {
		if !keep(id) {
			continue
		}
		var d float64
		for j, v := range data[id*dim : (id+1)*dim] {
			x := float64(v) - float64(q[j])
			d += x * x
		}
		if len(best) < k || d < best[len(best)-1].d {
			i := len(best)
			if len(best) < k {
				best = append(best, scored{})
			} else {
				i--
			}
			for i > 0 && best[i-1].d > d {
				best[i] = best[i-1]
				i--
			}
			best[i] = scored{id, d}
		}
	}
	if len(hits) != len(best) {
		return fmt.Errorf("%d hits, want %d", len(hits), len(best))
	}
	for i, h := range hits {
		if int(h.ID) != best[i].id {
			return fmt.Errorf("hit %d is ID %d, want %d (distance %g)", i, h.ID, best[i].id, math.Sqrt(best[i].d))
		}
	}
	return nil
}
