package engine

import "context"

// progress is told how far a long call has got (WithProgress).
type progress = func(stage string, done, total int)

type progressKey struct{}

// WithProgress returns a context that makes a long Add, Upsert or
// SearchBatch given it tell p how far it has got: stage is "validate" or
// "upload" (done and total count vectors; total is -1 while a streamed
// source does not know its row count) or "search" (they count queries).
// p is called on the calling goroutine, between pieces of work, and must
// return quickly; a CLI draws it as a progress line.
func WithProgress(ctx context.Context, p func(stage string, done, total int)) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// progressFrom returns the context's progress function, or one that does
// nothing.
func progressFrom(ctx context.Context) progress {
	if p, ok := ctx.Value(progressKey{}).(progress); ok && p != nil {
		return p
	}
	return func(string, int, int) {}
}

// Units of work between two progress reports.
const (
	progressRows    = 1 << 16
	progressQueries = 256
)
