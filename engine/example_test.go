package engine_test

import (
	"context"
	"fmt"

	"github.com/umbravec/umbra/engine"
)

// Build an index, add vectors, and find the nearest by cosine similarity.
// Device Auto (the default) would use a GPU when one works; CPU keeps this
// example's output the same on every machine.
func Example() {
	ix, err := engine.New(engine.Config{Dim: 3, Device: engine.CPU})
	if err != nil {
		panic(err)
	}
	defer ix.Close()

	ids, err := ix.Add([][]float32{
		{1, 0, 0},
		{0, 1, 0},
		{0.9, 0.1, 0},
	})
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
	ix, err := engine.New(engine.Config{Dim: 768, Device: engine.CPU})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	info := ix.Info()
	fmt.Println(info.Backend, info.Metric, info.Dim)
	// Output: cpu cosine 768
}

// Errors name the problem and wrap a sentinel usable with errors.Is.
func ExampleIndex_Add_errors() {
	ix, _ := engine.New(engine.Config{Dim: 2, Device: engine.CPU})
	_, err := ix.Add([][]float32{{1, 2}, {3}})
	fmt.Println(err)
	// Output: umbra: dimension mismatch: vector 1 has 1 components, index dimension is 2
}

// WithTrace records where a search spent its time.
func ExampleWithTrace() {
	ix, _ := engine.New(engine.Config{Dim: 2, Device: engine.CPU})
	_, _ = ix.Add([][]float32{{1, 2}, {3, 4}})
	var tr engine.Trace
	_, _ = ix.Search(engine.WithTrace(context.Background(), &tr), []float32{1, 1}, 1)
	fmt.Println(tr.KernelClock)
	// Output: cpu
}
