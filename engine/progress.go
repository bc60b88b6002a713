package engine

import "context"

// Progress is told how far a long Add, Upsert or SearchBatch has
// got: stage is "validate" or "upload" (done and total count vectors; total
// is -1 while a streamed source does not know its row count) or "search"
// (they count queries). It is called on the calling goroutine,
// between pieces of work, and must return quickly. Attach one with
// WithProgress; a CLI draws it as a progress line.
type Progress func(stage string, done, total int)

type progressKey struct{}

// WithProgress returns a context that makes engine calls report to p.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// progressFrom returns the context's Progress, or one that does nothing.
func progressFrom(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return func(string, int, int) {}
}

// Units of work between two progress reports.
const (
	progressRows    = 1 << 16
	progressQueries = 256
)
