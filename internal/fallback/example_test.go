package fallback_test

import (
	"context"
	"fmt"

	"github.com/umbravec/umbra/internal/fallback"
)

// Three 3-dimensional rows packed with a stride of 4 (the padding is zero).
var exampleSlab = fallback.Slab{
	Data: []float32{
		1, 0, 0, 0,
		0, 1, 0, 0,
		0.6, 0.8, 0, 0,
	},
	Rows: 3, Dim: 3, Stride: 4,
}

func ExampleSearch() {
	hits, err := fallback.Search(context.Background(), exampleSlab, []float32{0, 1, 0}, 2, fallback.Dot, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range hits {
		fmt.Printf("row %d score %.2f\n", h.Row, h.Score)
	}
	// Output:
	// row 1 score 1.00
	// row 2 score 0.80
}

func ExampleSearchBatch() {
	qs := [][]float32{{1, 0, 0}, {0, 1, 0}}
	all, err := fallback.SearchBatch(context.Background(), exampleSlab, qs, 1, fallback.L2, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for j, hits := range all {
		fmt.Printf("query %d: row %d distance %.2f\n", j, hits[0].Row, hits[0].Score)
	}
	// Output:
	// query 0: row 0 distance 0.00
	// query 1: row 1 distance 0.00
}

func ExampleKernel() {
	name := fallback.Kernel()
	fmt.Println(name != "")
	// Output:
	// true
}

func ExampleReadPass() {
	// The sum only proves the reads happened; its time is the floor an
	// exact scan of this slab can reach.
	sum, err := fallback.ReadPass(context.Background(), exampleSlab, 0)
	fmt.Printf("%.1f %v\n", sum, err)
	// Output:
	// 3.4 <nil>
}

func ExampleQueryBlock() {
	// A batch of 300 queries of dimension 768 reads the slab three times.
	qb := fallback.QueryBlock(768)
	fmt.Println(qb, (300+qb-1)/qb)
	// Output:
	// 128 3
}
