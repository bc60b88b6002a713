package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// The benchmarks time one call of each tier at a size small enough for
// go test -bench: 5,000×256, k=10, cosine. Compare runs with benchstat:
//
//	go test -run '^$' -bench . -count 10 ./bench/ > new.txt
//	benchstat old.txt new.txt
//
// The GPU tiers use any working adapter (Device GPU, software adapters
// included) and skip with the engine's reason when there is none.
const benchN, benchDim, benchK = 5000, 256, 10

var benchData = sync.OnceValue(func() *Workload { return RandomWorkload(benchN, benchDim, 8, 1) })

func benchConfig(d engine.Device) engine.Config {
	return engine.Config{Dim: benchDim, Device: d}
}

// benchRunner opens tier t over the benchmark data, or skips.
func benchRunner(b *testing.B, t Tier) runner {
	w := benchData()
	ctx := context.Background()
	if t == TierFallback {
		ix, err := engine.New(context.Background(), benchConfig(engine.CPU))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ix.Add(ctx, umbra.Flat(w.Data, ix.Dim())); err != nil {
			b.Fatal(err)
		}
		return &residentRunner{ix: ix, owned: true}
	}
	ix, err := engine.New(context.Background(), benchConfig(engine.GPU))
	if err != nil {
		b.Skip("no usable GPU adapter: ", err)
	}
	switch t {
	case TierContiguous, TierList:
		ix.Close()
		return &rebuildRunner{cfg: benchConfig(engine.GPU), w: w, flat: t == TierContiguous}
	}
	if _, err := ix.Add(ctx, umbra.Flat(w.Data, ix.Dim())); err != nil {
		b.Fatal(err)
	}
	return &residentRunner{ix: ix, owned: true, kernelOnly: t == TierKernel}
}

// BenchmarkTier reports ns/op for the whole call; the kernel tier also
// reports kernel-ns/op, the dispatch alone (its ns/op includes a traced
// search around it).
func BenchmarkTier(b *testing.B) {
	for _, t := range AllTiers {
		b.Run(string(t), func(b *testing.B) {
			r := benchRunner(b, t)
			defer r.close()
			w := benchData()
			ctx := context.Background()
			if _, _, err := r.call(ctx, w.Queries[0], benchK); err != nil { // warm-up
				b.Fatal(err)
			}
			var charged time.Duration
			i := 0
			for b.Loop() {
				d, _, err := r.call(ctx, w.Queries[i%len(w.Queries)], benchK)
				if err != nil {
					b.Fatal(err)
				}
				charged += d
				i++
			}
			if t == TierKernel {
				b.ReportMetric(float64(charged.Nanoseconds())/float64(i), "kernel-ns/op")
			}
		})
	}
}

// BenchmarkReference times the float64 reference the checks use, so its
// share of a run's start-up is known.
func BenchmarkReference(b *testing.B) {
	w := benchData()
	for b.Loop() {
		NewReference(w.Data, benchDim, w.Queries[0], umbra.Cosine)
	}
}
