package peers

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/philippgille/chromem-go"
	"github.com/umbravec/umbra"
)

const chromemModule = "github.com/philippgille/chromem-go"

// ChromemVersion is the chromem-go version compiled in, from the build
// information (the go.mod requirement when that is not available).
func ChromemVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == chromemModule {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "v0.7.0"
}

// ChromemPremise says what one timed chromem-go call includes.
const ChromemPremise = "chromem-go in process: Collection.QueryEmbedding on an in-memory collection holding the same " +
	"vectors (one Document and one slice per vector, normalised by chromem-go at Add): normalise the query, a dot " +
	"product per document on GOMAXPROCS goroutines, a shared locked top-k heap; cosine only"

// Chromem is a chromem-go collection filled with a run's vectors. chromem-go
// computes cosine similarity only.
type Chromem struct {
	col *chromem.Collection
}

// errNoText is what the embedding function answers: every document and
// query arrives with its embedding, so chromem-go must never compute one.
var errNoText = errors.New("peers: chromem-go asked to embed text, but every vector is given")

func noEmbedding(context.Context, string) ([]float32, error) { return nil, errNoText }

// NewChromem stores the n×dim rows of data (row-major) as documents whose
// IDs are the row numbers, as engine.Index assigns them. The rows are
// passed as views of data; chromem-go keeps its own normalised copy of each
// row that is not of unit length.
func NewChromem(ctx context.Context, data []float32, dim int) (*Chromem, error) {
	if dim < 1 || len(data) == 0 || len(data)%dim != 0 {
		return nil, fmt.Errorf("peers: %d values are not rows of dimension %d", len(data), dim)
	}
	col, err := chromem.NewDB().CreateCollection("umbra-bench", nil, noEmbedding)
	if err != nil {
		return nil, fmt.Errorf("chromem-go: %w", err)
	}
	n := len(data) / dim
	docs := make([]chromem.Document, n)
	for i := range docs {
		docs[i] = chromem.Document{ID: strconv.Itoa(i), Embedding: data[i*dim : (i+1)*dim : (i+1)*dim]}
	}
	if err := col.AddDocuments(ctx, docs, runtime.GOMAXPROCS(0)); err != nil {
		return nil, fmt.Errorf("chromem-go: %w", err)
	}
	return &Chromem{col: col}, nil
}

// Search returns chromem-go's top k for q, best first, as hits whose IDs
// are row numbers and whose scores are chromem-go's cosine similarities.
func (c *Chromem) Search(ctx context.Context, q []float32, k int) ([]umbra.Hit, error) {
	res, err := c.col.QueryEmbedding(ctx, q, k, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("chromem-go: %w", err)
	}
	hits := make([]umbra.Hit, len(res))
	for i, r := range res {
		id, err := strconv.ParseUint(r.ID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("chromem-go returned document %q, not one of ours", r.ID)
		}
		hits[i] = umbra.Hit{ID: id, Score: r.Similarity}
	}
	return hits, nil
}

// SearchBatch answers each query in turn: chromem-go has no batch query.
func (c *Chromem) SearchBatch(ctx context.Context, qs [][]float32, k int) ([][]umbra.Hit, error) {
	all := make([][]umbra.Hit, len(qs))
	for i, q := range qs {
		hits, err := c.Search(ctx, q, k)
		if err != nil {
			return nil, err
		}
		all[i] = hits
	}
	return all, nil
}
