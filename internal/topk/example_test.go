package topk_test

import (
	"fmt"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/topk"
)

func ExampleSelectTopK() {
	// Scores as read back from a GPU; equal scores rank by lower index.
	scores := []float32{0.5, 0.9, 0.1, 0.9}
	fmt.Println(topk.SelectTopK(scores, 3, core.Dot))
	// Output:
	// [{1 0.9} {3 0.9} {0 0.5}]
}
