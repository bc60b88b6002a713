//go:build !(js && wasm)

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/browsertest"
	"github.com/umbravec/umbra/internal/testkit"
)

// BenchmarkWebSearch measures one search of 50,000 × 768 (k 10) four
// ways, on the same vectors and queries: the --web page on the browser's
// WebGPU (SwiftShader where there is no GPU), the page's wasm CPU
// fallback (?device=cpu), and natively the engine on wgpu's adapter
// (lavapipe where there is no GPU) and on the CPU fallback. It checks
// that all four return the same hits (IDs, scores within 1e-5, up to
// near-ties) and reports each one's median milliseconds a search and the
// page's start-up. Run it once:
//
//	UMBRA_BROWSER=1 go test -run '^$' -bench BenchmarkWebSearch -benchtime 1x -timeout 30m ./cmd/demo
func BenchmarkWebSearch(b *testing.B) {
	chromium := browsertest.Require(b)
	const n, dim, k, queries = 50000, 768, 10, 5
	r := testkit.Rand(b)
	seed := int64(r.Uint32())
	set := syntheticSet(n, dim, seed)
	qs := make([][]float32, queries)
	for i := range qs {
		qs[i] = testkit.Vector(r, dim)
	}
	type hit struct {
		ID    uint64
		Score float32
	}
	type way struct {
		name string
		ms   []float64
		hits [][]hit
		note string
	}
	var ways []*way

	// Natively: the engine on wgpu's adapter, then on the CPU fallback.
	// The CPU twice: with every core, and with one worker (the wasm build
	// has one thread).
	for _, cfg := range []engine.Config{{Device: engine.GPU}, {Device: engine.CPU}, {Device: engine.CPU, Workers: 1}} {
		ctx := context.Background()
		cfg.Dim = dim
		ix, err := engine.New(ctx, cfg)
		if err != nil {
			b.Fatalf("native %v: %v", cfg.Device, err)
		}
		if _, err := ix.Add(ctx, umbra.Flat(set.data, dim)); err != nil {
			b.Fatal(err)
		}
		info := ix.Info()
		w := &way{name: "native " + strings.ToLower(info.Device.String())}
		if info.Device == engine.GPU {
			w.note = "wgpu, " + info.Adapter.String()
		} else {
			w.note = fmt.Sprintf("CPU fallback, kernel %s, %d cores", info.CPUKernel, runtime.GOMAXPROCS(0))
			if cfg.Workers == 1 {
				w.name += "-1"
				w.note = "CPU fallback, kernel " + info.CPUKernel + ", one worker"
			}
		}
		if _, err := ix.Search(ctx, qs[0], k); err != nil { // warm
			b.Fatal(err)
		}
		for _, q := range qs {
			start := time.Now()
			hs, err := ix.Search(ctx, q, k)
			if err != nil {
				b.Fatal(err)
			}
			w.ms = append(w.ms, float64(time.Since(start).Microseconds())/1000)
			var got []hit
			for _, h := range hs {
				got = append(got, hit{h.ID, h.Score})
			}
			w.hits = append(w.hits, got)
		}
		ix.Close()
		ways = append(ways, w)
	}

	// In the page: WebGPU, then the wasm CPU fallback, one tab each.
	h, err := webHandler(set, pageProgram(b), defaultWebLimits)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := newWebServer(h, defaultWebLimits)
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	bctx, closeBrowser := browsertest.Browser(ctx, chromium, b.Logf)
	defer closeBrowser()
	var qjs []string
	for _, q := range qs {
		parts := make([]string, dim)
		for i, x := range q {
			parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
		}
		qjs = append(qjs, "new Float32Array(["+strings.Join(parts, ",")+"])")
	}
	for _, device := range []string{"gpu", "cpu"} {
		tab, closeTab := chromedp.NewContext(bctx)
		if _, err := chromedp.Run(tab, chromedp.Navigate("http://"+ln.Addr().String()+"/?device="+device)); err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](`!!window.umbra`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
			b.Fatal(err)
		}
		raw, err := chromedp.Run(tab, chromedp.Evaluate[string](`umbra.ready.then(() => JSON.stringify(umbra.info()))`, chromedp.EvalAwaitPromise))
		if err != nil {
			b.Fatalf("page ?device=%s: %v", device, err)
		}
		var info struct {
			Backend, Adapter, Reason string
			LoadMs                   float64
		}
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			b.Fatal(err)
		}
		if info.Backend != device {
			b.Fatalf("page ?device=%s runs on %q (%s)", device, info.Backend, info.Reason)
		}
		w := &way{name: "page " + device}
		if device == "gpu" {
			w.note = fmt.Sprintf("WebGPU, %s; start-up (probe, fetch, index) %.0f ms", info.Adapter, info.LoadMs)
		} else {
			w.note = fmt.Sprintf("wasm CPU fallback; start-up (fetch, index) %.0f ms", info.LoadMs)
		}
		js := fmt.Sprintf(`(async () => {
			const qs = [%s], out = [];
			await umbra.search(qs[0], %d); // warm
			for (const q of qs) {
				const t0 = performance.now();
				const hits = await umbra.search(q, %d);
				out.push({ms: performance.now() - t0, hits});
			}
			return JSON.stringify(out);
		})()`, strings.Join(qjs, ","), k, k)
		raw, err = chromedp.Run(tab, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			b.Fatalf("page ?device=%s searches: %v", device, err)
		}
		var res []struct {
			MS   float64
			Hits []hit
		}
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			b.Fatal(err)
		}
		for _, x := range res {
			w.ms = append(w.ms, x.MS)
			w.hits = append(w.hits, x.Hits)
		}
		closeTab()
		ways = append(ways, w)
	}

	// Every way's hits against the native fallback's (ways[1]): the same
	// IDs, scores within 1e-5; a swapped ID only where its score ties the
	// rank's within 1e-5 too.
	ref := ways[1]
	for _, w := range ways {
		for qi := range qs {
			got, want := w.hits[qi], ref.hits[qi]
			if len(got) != len(want) {
				b.Fatalf("%s, query %d: %d hits, the native fallback %d", w.name, qi, len(got), len(want))
			}
			for i := range want {
				if math.Abs(float64(got[i].Score-want[i].Score)) > 1e-5 {
					b.Fatalf("%s, query %d, rank %d: ID %d score %g, the native fallback's ID %d score %g",
						w.name, qi, i, got[i].ID, got[i].Score, want[i].ID, want[i].Score)
				}
				if got[i].ID != want[i].ID && !slices.ContainsFunc(want, func(h hit) bool { return h.ID == got[i].ID }) {
					b.Logf("%s, query %d, rank %d: ID %d for the fallback's %d (scores tie within 1e-5)", w.name, qi, i, got[i].ID, want[i].ID)
				}
			}
		}
	}
	b.Logf("%d × %d, k %d, %d queries after one warm-up; every answer matched the native fallback's", n, dim, k, queries)
	for _, w := range ways {
		ms := slices.Clone(w.ms)
		slices.Sort(ms)
		med := ms[len(ms)/2]
		b.Logf("%-12s median %9.1f ms a search (min %.1f, max %.1f)  %s", w.name, med, ms[0], ms[len(ms)-1], w.note)
		b.ReportMetric(med, strings.ReplaceAll(w.name, " ", "-")+"-ms/search")
	}
}

// BenchmarkWebStartup measures the --web page's start-up as a user gets
// it: the demo's default vectors (20,000 × 384, seed 1), Chromium with
// its default settings (workgroup zero-initialisation on), from
// navigation until umbra.ready, and logs each stage the page showed
// with its time. Run it once:
//
//	UMBRA_BROWSER=1 go test -run '^$' -bench BenchmarkWebStartup -benchtime 1x ./cmd/demo
func BenchmarkWebStartup(b *testing.B) {
	chromium := browsertest.Require(b)
	o, err := parseFlags([]string{"--web"}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	h, err := webHandler(syntheticSet(o.n, o.dim, o.seed), pageProgram(b), defaultWebLimits)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := newWebServer(h, defaultWebLimits)
	go srv.Serve(ln)
	defer srv.Close()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		bctx, closeBrowser := browsertest.Browser(ctx, chromium, b.Logf)
		if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+ln.Addr().String()+"/")); err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`!!window.umbra`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
			b.Fatal(err)
		}
		ms, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`umbra.ready.then(() => performance.now())`, chromedp.EvalAwaitPromise))
		if err != nil {
			b.Fatalf("umbra.ready: %v", err)
		}
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("#progress li")].map(li => li.textContent))`))
		if err != nil {
			b.Fatal(err)
		}
		var shown []string
		if err := json.Unmarshal([]byte(raw), &shown); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d × %d: umbra.ready %.1f s after navigation", o.n, o.dim, ms/1000)
		for _, s := range shown {
			b.Logf("  %s", s)
		}
		b.ReportMetric(ms/1000, "s-to-ready")
		closeBrowser()
		cancel()
	}
}
