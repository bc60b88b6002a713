package engine_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
)

// Build an index, add vectors, and find the nearest by cosine similarity.
// Device Auto (the default) would use a GPU when one works; CPU keeps this
// example's output the same on every machine.
func Example() {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 3, Device: engine.CPU})
	if err != nil {
		panic(err)
	}
	defer ix.Close()

	ids, err := ix.Add(context.Background(), umbra.Vectors([][]float32{
		{1, 0, 0},
		{0, 1, 0},
		{0.9, 0.1, 0},
	}))
	if err != nil {
		panic(err)
	}
	fmt.Println("ids:", ids)

	hits, err := ix.Search(context.Background(), []float32{1, 0.05, 0}, 2)
	if err != nil {
		panic(err)
	}
	for _, h := range hits {
		fmt.Printf("id %d score %.4f\n", h.ID, h.Score)
	}
	// Output:
	// ids: [0 1 2]
	// id 0 score 0.9988
	// id 2 score 0.9982
}

// Info says which backend serves an index and, after a fallback, why.
func ExampleIndex_Info() {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 768, Device: engine.CPU})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	info := ix.Info()
	fmt.Println(info.Device, ix.Metric(), ix.Dim())
	// Output: cpu cosine 768
}

// Errors name the problem and wrap a sentinel usable with errors.Is.
func ExampleIndex_Add_errors() {
	ix, _ := engine.New(context.Background(), engine.Config{Dim: 2, Device: engine.CPU})
	_, err := ix.Add(context.Background(), umbra.Vectors([][]float32{{1, 2}, {3}}))
	fmt.Println(err)
	// Output: dimension mismatch: vector 1 has 1 components, index dimension is 2
}

// WithTrace records where a search spent its time.
func ExampleWithTrace() {
	ix, _ := engine.New(context.Background(), engine.Config{Dim: 2, Device: engine.CPU})
	_, _ = ix.Add(context.Background(), umbra.Vectors([][]float32{{1, 2}, {3, 4}}))
	var tr diag.Trace
	_, _ = ix.Search(diag.WithTrace(context.Background(), &tr), []float32{1, 1}, 1)
	fmt.Println(tr.KernelClock)
	// Output: cpu
}

// SearchBatch answers many queries in one call; on the CPU each block of
// stored rows is read once per block of queries, on the GPU once per tile.
// Under L2 the score is the squared distance, lowest first; rows 1 and 2 tie
// for the second query, and the lower ID wins.
func ExampleIndex_SearchBatch() {
	ix, _ := engine.New(context.Background(), engine.Config{Dim: 2, Metric: umbra.L2, Device: engine.CPU})
	defer ix.Close()
	_, _ = ix.Add(context.Background(), umbra.Vectors([][]float32{{0, 0}, {1, 0}, {0, 1}, {5, 5}}))
	all, err := ix.SearchBatch(context.Background(), [][]float32{{0.9, 0}, {4, 4}}, 2)
	if err != nil {
		panic(err)
	}
	for i, hits := range all {
		fmt.Printf("query %d: id %d (%.2f), id %d (%.2f)\n", i, hits[0].ID, hits[0].Score, hits[1].ID, hits[1].Score)
	}
	// Output:
	// query 0: id 1 (0.01), id 0 (0.81)
	// query 1: id 3 (2.00), id 1 (25.00)
}

// Flat gives Add rows as one row-major slice, as read from a .npy or .fvecs
// file, without a slice per row; WithKeys names them.
func ExampleFlat() {
	ix, _ := engine.New(context.Background(), engine.Config{Dim: 3, Metric: umbra.Dot, Device: engine.CPU})
	defer ix.Close()
	ids, err := ix.Add(context.Background(), umbra.Flat([]float32{
		1, 0, 0,
		0, 2, 0,
	}, 3), umbra.WithKeys("a", "b"))
	fmt.Println(ids, err, ix.Len())
	id, _ := ix.Lookup("b")
	fmt.Println(id)
	// Output:
	// [0 1] <nil> 2
	// 1
}

// WithIDs and WithKeys together store each row under its ID and name it
// by its key ("": no key), as a store rebuilt from its export must; a key
// already stored, or one breaking the key rule, is refused by name.
func ExampleWithKeys() {
	ctx := context.Background()
	ix, _ := engine.New(ctx, engine.Config{Dim: 2, Metric: umbra.L2, Device: engine.CPU})
	defer ix.Close()
	_, err := ix.Add(ctx, umbra.Vectors([][]float32{{0, 1}, {1, 0}, {1, 1}}),
		umbra.WithIDs(40, 7, 12), umbra.WithKeys("alice/m1", "", "bob/m1"))
	fmt.Println(err)
	hits, _ := ix.Search(ctx, []float32{0, 0.9}, 2)
	for _, h := range hits {
		fmt.Printf("id %d key %q\n", h.ID, h.Key)
	}
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{{2, 2}}), umbra.WithKeys("bob/m1"))
	fmt.Println(errors.Is(err, umbra.ErrKeyExists), err)
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{{2, 2}}), umbra.WithKeys("two\nlines"))
	fmt.Println(errors.Is(err, umbra.ErrInvalidKey))
	// Output:
	// <nil>
	// id 40 key "alice/m1"
	// id 12 key "bob/m1"
	// true key already stored: "bob/m1" (vector 0); use Upsert to replace its vector
	// true
}

// WithProgress reports how far a long Add or SearchBatch has got.
func ExampleWithProgress() {
	ix, _ := engine.New(context.Background(), engine.Config{Dim: 1, Metric: umbra.Dot, Device: engine.CPU})
	defer ix.Close()
	ctx := engine.WithProgress(context.Background(), func(stage string, done, total int) {
		fmt.Printf("%s %d/%d\n", stage, done, total)
	})
	_, _ = ix.Add(ctx, umbra.Vectors([][]float32{{1}, {2}, {3}}))
	// Output: validate 3/3
}

// Probe lists every adapter with its verdict and says which one Auto would
// use; `umbra probe` prints the same verdicts with what was measured.
func ExampleProbe() {
	rep := engine.Probe(context.Background(), engine.AdapterSelect{})
	for i, a := range rep.Adapters {
		fmt.Printf("%d %s works=%v eligible=%v %s\n", i, a.Adapter, a.Works, a.Eligible, a.Error)
	}
	if rep.Auto < 0 {
		fmt.Println("Auto uses the CPU:", rep.Reason, "—", rep.Hint)
	}
}

// ParseMetric and ParseDevice read the names a command line uses.
func ExampleParseMetric() {
	m, err := umbra.ParseMetric("L2")
	fmt.Println(m, m.HigherIsBetter(), err)
	d, err := engine.ParseDevice("gpu")
	fmt.Println(d, err)
	_, err = umbra.ParseMetric("manhattan")
	fmt.Println(err)
	// Output:
	// l2 false <nil>
	// gpu <nil>
	// invalid config: unknown metric "manhattan" (want cosine, dot or l2)
}
