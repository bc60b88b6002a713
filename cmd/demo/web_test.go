//go:build !(js && wasm)

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
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

// TestWebPage serves the --web page, loads it in headless Chromium
// (WebGPU on SwiftShader where there is no GPU) and checks, in one page
// load (the probe's pipelines take seconds each on SwiftShader):
//
//   - progress: the page's progress list went through the start-up's
//     stages in order;
//   - bad calls: every window.umbra entry point, called with null,
//     undefined, wrong types, NaN, rows and k out of range, vectors of
//     the wrong length and a query whose reading throws, throws (info,
//     row, progress) or rejects (search) with a TypeError, RangeError or
//     Error naming the call, and the Go program keeps running;
//   - form: the page shows such an error for a row out of range, then
//     searches again;
//   - answers exactly: window.umbra runs on the GPU, and its answers for
//     random queries — k from 1 to every row, so the fused, radix and
//     host selections all run — are the CPU fallback's: the same IDs (up
//     to scores within float32 rounding of each other) and scores within
//     1e-5;
//   - cpu progress: the page with ?device=cpu goes through the stages
//     without WebGPU's and answers on the CPU.
//
// UMBRA_WEB_SCREENSHOT names a PNG to write of the page after its own
// first search (CI keeps it).
func TestWebPage(t *testing.T) {
	chromium := browsertest.Require(t)
	r := testkit.Rand(t)
	// 2,000 rows of dimension 768 are several chunks and workgroups;
	// the page's probe self-tests its pipelines at the vectors'
	// dimension, which the index then reuses. Chromium runs without
	// workgroup zero-initialisation, as the second judge does
	// (browsertest.NoWorkgroupInit): with it the probe's pipelines take
	// several times longer to build on SwiftShader. BenchmarkWebSearch
	// runs the page with Chrome's defaults.
	const n, dim = 2000, 768
	seed := int64(r.Uint32())
	set := syntheticSet(n, dim, seed)
	h, err := webHandler(set, pageProgram(t), defaultWebLimits)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newWebServer(h, defaultWebLimits)
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bctx, closeBrowser := browsertest.Browser(ctx, chromium, t.Logf, browsertest.NoWorkgroupInit)
	defer closeBrowser()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+ln.Addr().String()+"/")); err != nil {
		t.Fatalf("driving Chromium: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`!!window.umbra`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for window.umbra: %v", err)
	}
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`umbra.ready.then(() => JSON.stringify(umbra.info()))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("umbra.ready: %v", err)
	}
	var info struct {
		Backend, Adapter, Reason string
		Rows, Dim                int
		LoadMs                   float64
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		t.Fatal(err)
	}
	t.Logf("page: %s", raw)
	if info.Backend != "gpu" || info.Rows != n || info.Dim != dim {
		t.Fatalf("the page runs on %q (%s) with %d × %d, want the GPU with %d × %d", info.Backend, info.Reason, info.Rows, info.Dim, n, dim)
	}
	// The page's own first search, which follows ready.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelectorAll("#hits tbody tr").length > 0`)); err != nil {
		t.Fatalf("waiting for the page's own search: %v", err)
	}
	if path := os.Getenv("UMBRA_WEB_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}

	t.Run("progress", func(t *testing.T) {
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("#progress li")].map(li => [li.dataset.stage, li.textContent]))`))
		if err != nil {
			t.Fatal(err)
		}
		var items [][2]string
		if err := json.Unmarshal([]byte(raw), &items); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, it := range items {
			seen = append(seen, it[0])
			t.Logf("progress: %s", it[1])
		}
		// The probe tries variants until one passes its self-test: one
		// or more rounds of compile and self-test.
		got := strings.Join(seen, " ")
		if !regexp.MustCompile(`^download start vectors adapter (compile self-test )+index upload search ready$`).MatchString(got) {
			t.Errorf("the page's progress went through %q", got)
		}
	})

	t.Run("bad calls", func(t *testing.T) {
		js := fmt.Sprintf(`(async () => {
			const n = %d, dim = %d, q = umbra.row(0), out = [];
			const vec = (f) => { const v = Array.from(q); f(v); return v; };
			const throwing = new Proxy(new Float32Array(dim), {get(t, p) {
				if (p === "5") throw new Error("boom from a getter");
				const v = Reflect.get(t, p);
				return typeof v === "function" ? v.bind(t) : v;
			}});
			const cases = {
				"info(1)": () => umbra.info(1),
				"progress(1)": () => umbra.progress(1),
				"row()": () => umbra.row(),
				"row(null)": () => umbra.row(null),
				"row(undefined)": () => umbra.row(undefined),
				"row('3')": () => umbra.row("3"),
				"row(true)": () => umbra.row(true),
				"row({})": () => umbra.row({}),
				"row(3n)": () => umbra.row(3n),
				"row(Symbol())": () => umbra.row(Symbol()),
				"row(NaN)": () => umbra.row(NaN),
				"row(Infinity)": () => umbra.row(Infinity),
				"row(1.5)": () => umbra.row(1.5),
				"row(-1)": () => umbra.row(-1),
				"row(n)": () => umbra.row(n),
				"row(2**53)": () => umbra.row(2 ** 53),
				"row(0, 1)": () => umbra.row(0, 1),
				"search()": () => umbra.search(),
				"search(q)": () => umbra.search(q),
				"search(q, 10, 1)": () => umbra.search(q, 10, 1),
				"search(null, 10)": () => umbra.search(null, 10),
				"search(undefined, 10)": () => umbra.search(undefined, 10),
				"search('abc', 10)": () => umbra.search("abc", 10),
				"search(7, 10)": () => umbra.search(7, 10),
				"search({length: dim}, 10)": () => umbra.search({length: dim}, 10),
				"search(short, 10)": () => umbra.search(new Float32Array(dim - 1), 10),
				"search(long, 10)": () => umbra.search(new Float64Array(dim + 1), 10),
				"search(empty, 10)": () => umbra.search([], 10),
				"search(strings, 10)": () => umbra.search(vec(v => v[3] = "1"), 10),
				"search(hole, 10)": () => umbra.search(vec(v => delete v[4]), 10),
				"search(NaN in q, 10)": () => umbra.search(vec(v => v[7] = NaN), 10),
				"search(Infinity in q, 10)": () => umbra.search(vec(v => v[0] = -Infinity), 10),
				"search(1e39 in q, 10)": () => umbra.search(vec(v => v[1] = 1e39), 10),
				"search(throwing getter, 10)": () => umbra.search(throwing, 10),
				"search(fake Float32Array, 10)": () => umbra.search({[Symbol.toStringTag]: "Float32Array", length: dim}, 10),
				"search(q, null)": () => umbra.search(q, null),
				"search(q, undefined)": () => umbra.search(q, undefined),
				"search(q, '10')": () => umbra.search(q, "10"),
				"search(q, NaN)": () => umbra.search(q, NaN),
				"search(q, Infinity)": () => umbra.search(q, Infinity),
				"search(q, 0)": () => umbra.search(q, 0),
				"search(q, -1)": () => umbra.search(q, -1),
				"search(q, 1.5)": () => umbra.search(q, 1.5),
				"search(q, 2**40)": () => umbra.search(q, 2 ** 40),
				"search(q, 10n)": () => umbra.search(q, 10n),
			};
			for (const [name, f] of Object.entries(cases)) {
				const r = {name};
				try {
					const v = f();
					r.promise = v instanceof Promise;
					if (r.promise) await v;
					r.ok = true;
				} catch (e) {
					r.error = (e && e.constructor && e.constructor.name) + ": " + (e && e.message);
				}
				out.push(r);
			}
			return JSON.stringify(out);
		})()`, n, dim)
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("the bad calls: %v", err)
		}
		var res []struct {
			Name, Error string
			Promise, OK bool
		}
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 {
			t.Fatal("no bad call ran")
		}
		classes := regexp.MustCompile(`^(TypeError|RangeError|Error): umbra\.(info|row|progress|search)\(`)
		for _, r := range res {
			search := strings.HasPrefix(r.Name, "search")
			switch {
			case r.OK:
				t.Errorf("%s was accepted", r.Name)
			case !classes.MatchString(r.Error):
				t.Errorf("%s: %q does not name the call", r.Name, r.Error)
			case search && !r.Promise:
				t.Errorf("%s threw (%s) instead of returning a rejected Promise", r.Name, r.Error)
			case !search && r.Promise:
				t.Errorf("%s returned a Promise", r.Name)
			}
			t.Logf("%-28s %s", r.Name, r.Error)
		}
		for _, r := range res {
			if r.Name == "search(throwing getter, 10)" && !strings.Contains(r.Error, "boom from a getter") {
				t.Errorf("%s: %q, want the getter's exception", r.Name, r.Error)
			}
		}
		alive, err := chromedp.Run(bctx, chromedp.Evaluate[string](`umbra.search(umbra.row(1), 3).then(h => umbra.info().backend + " " + h.length)`, chromedp.EvalAwaitPromise))
		if err != nil || alive != "gpu 3" {
			t.Fatalf("after the bad calls the page answers %q, %v", alive, err)
		}
	})

	t.Run("form", func(t *testing.T) {
		shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`(async () => {
			document.getElementById("row").value = "%d";
			await search();
			const bad = document.getElementById("took").textContent + " | " + document.querySelectorAll("#hits tbody tr").length;
			document.getElementById("row").value = "1";
			await search();
			return bad + " | " + document.querySelectorAll("#hits tbody tr").length;
		})()`, n), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("search failed: umbra.row(i): row %d is out of range: the index has %d rows (0 to %d) | 0 | 10", n, n, n-1)
		if shown != want {
			t.Errorf("the page shows %q, want %q", shown, want)
		}
	})

	t.Run("answers exactly", func(t *testing.T) {
		answersExactly(t, bctx, set, r)
	})

	// The page on the CPU (?device=cpu, a second tab): no WebGPU stages.
	t.Run("cpu progress", func(t *testing.T) {
		tab, closeTab := chromedp.NewContext(bctx)
		defer closeTab()
		if _, err := chromedp.Run(tab, chromedp.Navigate("http://"+ln.Addr().String()+"/?device=cpu")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](`!!window.umbra`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`umbra.ready.then(info => umbra.search(umbra.row(3), 2).then(h =>
			info.backend + " " + h.length + " " + [...document.querySelectorAll("#progress li")].map(li => li.dataset.stage).join(" ")))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if want := "cpu 2 download start vectors index upload search ready"; got != want {
			t.Errorf("the page on the CPU: %q, want %q", got, want)
		}
	})
}

// answersExactly checks the page's answers for random queries, k from 1
// to every row, against the CPU fallback's.
func answersExactly(t *testing.T, bctx context.Context, set *memorySet, r *rand.Rand) {
	n, dim := set.rows, set.dim
	ref, err := engine.New(context.Background(), engine.Config{Dim: dim, Device: engine.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if _, err := ref.Add(context.Background(), umbra.Flat(set.data, dim)); err != nil {
		t.Fatal(err)
	}
	for qi, k := range []int{1, 10, 257, n / 2, n} {
		q := testkit.Vector(r, dim)
		parts := make([]string, dim)
		for i, x := range q {
			parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
		}
		js := fmt.Sprintf(`umbra.search(new Float32Array([%s]), %d).then(JSON.stringify)`, strings.Join(parts, ","), k)
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("query %d, k %d: %v", qi, k, err)
		}
		var got []struct {
			ID    uint64
			Score float32
		}
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		want, err := ref.Search(context.Background(), q, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("query %d, k %d: %d hits, the fallback %d", qi, k, len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if math.Abs(float64(g.Score-w.Score)) > 1e-5 {
				t.Fatalf("query %d, k %d, rank %d: score %g, the fallback's %g", qi, k, i, g.Score, w.Score)
			}
			if g.ID != w.ID {
				// Only a near-tie may swap two IDs: the score the
				// fallback gives the page's ID must match the rank's.
				other, err := ref.Search(context.Background(), q, n)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range other {
					if h.ID == g.ID && math.Abs(float64(h.Score-w.Score)) > 1e-5 {
						t.Fatalf("query %d, k %d, rank %d: ID %d (score %g), the fallback's ID %d (score %g)", qi, k, i, g.ID, h.Score, w.ID, w.Score)
					}
				}
			}
		}
	}
}

// pageProgram builds the page's program into a temporary cache and
// returns its directory.
func pageProgram(t testing.TB) string {
	t.Helper()
	w, err := (&wasmBuilder{cacheDir: t.TempDir()}).get(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return w.dir
}
