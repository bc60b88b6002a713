//go:build js && wasm

// Command webapp is the demo page's program (go run ./cmd/demo --web
// builds and serves it): umbra's engine as wasm, on the browser's GPU
// through WebGPU, or on its CPU when that fails (the page says so). It
// publishes window.umbra:
//
//	umbra.ready                 a Promise, settled once the vectors are indexed
//	umbra.info()                {backend, adapter, reason, rows, dim, loadMs, source}
//	umbra.row(i)                row i as a Float32Array (a query to try)
//	umbra.search(query, k)      a Promise of [{id, score}, …], best first
//
// The page's ?device= chooses: gpu (the default: WebGPU with any adapter,
// software ones included, else the CPU with the reason), auto (umbra's
// Auto: a hardware adapter, else the CPU) or cpu.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/engine"
)

func main() {
	var resolve, reject js.Value
	ready := js.Global().Get("Promise").New(js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject = args[0], args[1]
		return nil
	}))
	app := &app{}
	u := js.Global().Get("Object").New()
	u.Set("ready", ready)
	u.Set("info", js.FuncOf(func(js.Value, []js.Value) any { return app.info() }))
	u.Set("row", js.FuncOf(func(_ js.Value, args []js.Value) any { return app.row(args) }))
	u.Set("search", js.FuncOf(func(_ js.Value, args []js.Value) any { return app.search(args) }))
	js.Global().Set("umbra", u)
	go func() {
		if err := app.load(); err != nil {
			reject.Invoke(js.Global().Get("Error").New(err.Error()))
			return
		}
		resolve.Invoke(app.info())
	}()
	select {}
}

type app struct {
	ix        *engine.Index
	rows, dim int
	data      []float32
	source    string
	loadMs    float64
	fellBack  string
}

func param(name string) string {
	v := js.Global().Get("URLSearchParams").New(js.Global().Get("location").Get("search")).Call("get", name)
	if v.IsNull() {
		return ""
	}
	return v.String()
}

func await(p js.Value) (js.Value, error) {
	ch := make(chan js.Value, 1)
	errc := make(chan error, 1)
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- a[0]; return nil })
	bad := js.FuncOf(func(_ js.Value, a []js.Value) any { errc <- errors.New(a[0].Call("toString").String()); return nil })
	defer ok.Release()
	defer bad.Release()
	p.Call("then", ok, bad)
	select {
	case v := <-ch:
		return v, nil
	case err := <-errc:
		return js.Value{}, err
	}
}

// load fetches the vectors and indexes them.
func (a *app) load() error {
	start := time.Now()
	resp, err := await(js.Global().Call("fetch", "vectors"))
	if err != nil {
		return fmt.Errorf("fetching the vectors: %w", err)
	}
	a.source = resp.Get("headers").Call("get", "X-Umbra-Source").String()
	buf, err := await(resp.Call("arrayBuffer"))
	if err != nil {
		return fmt.Errorf("reading the vectors: %w", err)
	}
	b := make([]byte, buf.Get("byteLength").Int())
	js.CopyBytesToGo(b, js.Global().Get("Uint8Array").New(buf))
	if len(b) < 8 {
		return fmt.Errorf("the vectors file is %d bytes", len(b))
	}
	a.rows, a.dim = int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if len(b) != 8+4*a.rows*a.dim {
		return fmt.Errorf("the vectors file is %d bytes for %d × %d", len(b), a.rows, a.dim)
	}
	a.data = make([]float32, a.rows*a.dim)
	for i := range a.data {
		a.data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[8+4*i:]))
	}
	ctx := context.Background()
	cfg := engine.Config{Dim: a.dim}
	switch param("device") {
	case "cpu":
		cfg.Device = engine.CPU
	case "auto":
		cfg.Device = engine.Auto
	default:
		cfg.Device = engine.GPU
	}
	a.ix, err = engine.New(ctx, cfg)
	if err != nil && cfg.Device == engine.GPU {
		a.fellBack = err.Error()
		cfg.Device = engine.CPU
		a.ix, err = engine.New(ctx, cfg)
	}
	if err != nil {
		return err
	}
	if _, err := a.ix.Add(ctx, engine.Flat(a.data, a.dim)); err != nil {
		return err
	}
	a.loadMs = float64(time.Since(start).Microseconds()) / 1000
	return nil
}

func (a *app) info() any {
	if a.ix == nil {
		return js.ValueOf(map[string]any{"backend": "loading"})
	}
	in := a.ix.Info()
	backend, adapter, reason := "cpu", "", in.Reason
	if in.Device == engine.GPU {
		backend, adapter = "gpu", in.Adapter.String()
	}
	if a.fellBack != "" {
		reason = a.fellBack
	}
	return js.ValueOf(map[string]any{"backend": backend, "adapter": adapter, "reason": reason,
		"rows": a.rows, "dim": a.dim, "loadMs": a.loadMs, "source": a.source})
}

func (a *app) row(args []js.Value) any {
	if len(args) < 1 || a.data == nil {
		return js.Null()
	}
	i := args[0].Int()
	if i < 0 || i >= a.rows {
		return js.Null()
	}
	out := js.Global().Get("Float32Array").New(a.dim)
	for j, x := range a.data[i*a.dim : (i+1)*a.dim] {
		out.SetIndex(j, float64(x))
	}
	return out
}

// search answers umbra.search(query, k) with a Promise; the search runs on
// its own goroutine (a JavaScript callback must not block).
func (a *app) search(args []js.Value) any {
	return js.Global().Get("Promise").New(js.FuncOf(func(_ js.Value, pr []js.Value) any {
		resolve, reject := pr[0], pr[1]
		go func() {
			hits, err := a.doSearch(args)
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(hits)
		}()
		return nil
	}))
}

func (a *app) doSearch(args []js.Value) (js.Value, error) {
	if a.ix == nil {
		return js.Value{}, errors.New("umbra is not ready: await umbra.ready")
	}
	if len(args) < 2 || args[1].Type() != js.TypeNumber {
		return js.Value{}, errors.New("search(query: Float32Array, k: number)")
	}
	q := args[0]
	n := q.Get("length")
	if n.Type() != js.TypeNumber {
		return js.Value{}, errors.New("the query is not an array")
	}
	query := make([]float32, n.Int())
	for i := range query {
		query[i] = float32(q.Index(i).Float())
	}
	hits, err := a.ix.Search(context.Background(), query, args[1].Int())
	if err != nil {
		return js.Value{}, err
	}
	out := js.Global().Get("Array").New()
	for _, h := range hits {
		out.Call("push", js.ValueOf(map[string]any{"id": float64(h.ID), "score": float64(h.Score)}))
	}
	return out, nil
}
