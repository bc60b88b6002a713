//go:build js && wasm

// Command webapp is the demo page's program (go run ./cmd/demo --web
// builds and serves it): umbra's engine as wasm, on the browser's GPU
// through WebGPU, or on its CPU when that fails (the page says so). It
// publishes window.umbra:
//
//	umbra.ready                 a Promise, settled once the vectors are indexed
//	umbra.info()                {backend, adapter, reason, rows, dim, loadMs, source, stage}
//	umbra.row(i)                row i as a Float32Array (a query to try)
//	umbra.search(query, k)      a Promise of [{id, score}, …], best first
//	umbra.progress()            the start-up's stages so far: [{stage, detail, ms}, …]
//
// Every call checks its arguments (package webapi): a bad one makes info
// and row throw, and search return a rejected Promise, with a TypeError or
// RangeError naming the argument and the problem. A panic inside a call
// is caught at the boundary and reported the same way, so the program
// never exits and later calls keep working.
//
// While it starts it dispatches an "umbra-progress" event on window for
// each stage (detail: {stage, detail, ms}): "vectors" (bytes fetched),
// "adapter", "compile" and "self-test" (the WebGPU probe), "index",
// "upload", "search" (the first one) and "ready".
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"time"
	"unsafe"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cmd/demo/internal/webapi"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/webgpu"
)

func main() {
	var resolve, reject js.Value
	executor := js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject = args[0], args[1]
		return nil
	})
	ready := js.Global().Get("Promise").New(executor)
	executor.Release()
	a := &app{start: time.Now()}
	u := js.Global().Get("Object").New()
	u.Set("ready", ready)
	u.Set("info", syncEntry("umbra.info()", a.info))
	u.Set("row", syncEntry("umbra.row(i)", a.row))
	u.Set("progress", syncEntry("umbra.progress()", a.progressList))
	u.Set("search", js.FuncOf(func(_ js.Value, args []js.Value) any { return a.search(args) }))
	js.Global().Set("umbra", u)
	go func() {
		err := guard("starting", a.load)
		a.mu.Lock()
		a.failed = err
		a.mu.Unlock()
		if err != nil {
			reject.Invoke(jsError(err))
			return
		}
		info, _ := a.info(nil)
		resolve.Invoke(info)
	}()
	select {}
}

// loaded is the indexed set, published once the start-up is done.
type loaded struct {
	ix        *engine.Index
	rows, dim int
	data      []float32
	source    string
	loadMs    float64
	fellBack  string
}

type app struct {
	start  time.Time
	mu     sync.Mutex
	l      *loaded // nil until ready
	failed error   // the start-up's error
	stage  string  // the start-up's current stage
	stages []js.Value
}

// report records the start of stage (or a new detail for the current one)
// and tells the page with an "umbra-progress" event.
func (a *app) report(stage, detail string) {
	ms := float64(time.Since(a.start).Microseconds()) / 1000
	ev := js.ValueOf(map[string]any{"stage": stage, "detail": detail, "ms": ms})
	a.mu.Lock()
	a.stage = stage
	a.stages = append(a.stages, ev)
	a.mu.Unlock()
	init := js.Global().Get("Object").New()
	init.Set("detail", ev)
	js.Global().Call("dispatchEvent", js.Global().Get("CustomEvent").New("umbra-progress", init))
}

func (a *app) progressList(args []js.Value) (any, error) {
	if err := webapi.Arity("umbra.progress()", values(args), 0); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]any, len(a.stages))
	for i, s := range a.stages {
		out[i] = s
	}
	return js.ValueOf(out), nil
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
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- arg0(a); return nil })
	bad := js.FuncOf(func(_ js.Value, a []js.Value) any { errc <- errors.New(message(arg0(a))); return nil })
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

func arg0(a []js.Value) js.Value {
	if len(a) == 0 {
		return js.Undefined()
	}
	return a[0]
}

// message is a thrown or rejected JavaScript value as text.
func message(v js.Value) string {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return m.String()
		}
	}
	return js.Global().Get("String").Invoke(v).String()
}

// mb writes a byte count in megabytes.
func mb(n int) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB" }

// fetchVectors fetches the page's vectors, reporting the bytes read.
func (a *app) fetchVectors() (*loaded, error) {
	a.report("vectors", "fetching the vectors")
	resp, err := await(js.Global().Call("fetch", "vectors"))
	if err != nil {
		return nil, fmt.Errorf("fetching the vectors: %w", err)
	}
	if !resp.Get("ok").Bool() {
		return nil, fmt.Errorf("fetching the vectors: HTTP %d %s", resp.Get("status").Int(), resp.Get("statusText").String())
	}
	l := &loaded{source: resp.Get("headers").Call("get", "X-Umbra-Source").String()}
	total, _ := strconv.Atoi(resp.Get("headers").Call("get", "Content-Length").String())
	b := make([]byte, 0, max(total, 8))
	reader := resp.Get("body").Call("getReader")
	last := time.Now()
	for {
		r, err := await(reader.Call("read"))
		if err != nil {
			return nil, fmt.Errorf("reading the vectors: %w", err)
		}
		if r.Get("done").Bool() {
			break
		}
		chunk := r.Get("value")
		n := chunk.Get("length").Int()
		b = slices.Grow(b, n)[:len(b)+n]
		js.CopyBytesToGo(b[len(b)-n:], chunk)
		if time.Since(last) > 100*time.Millisecond {
			last = time.Now()
			if total > 0 {
				a.report("vectors", mb(len(b))+" of "+mb(total))
			} else {
				a.report("vectors", mb(len(b)))
			}
		}
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("the vectors file is %d bytes", len(b))
	}
	l.rows, l.dim = int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if l.rows < 1 || l.dim < 1 || len(b) != 8+4*l.rows*l.dim {
		return nil, fmt.Errorf("the vectors file is %d bytes for %d × %d", len(b), l.rows, l.dim)
	}
	// wasm is little-endian, as the file is: the rows are b's bytes
	// after the header (8 bytes in, so 4-byte aligned).
	l.data = unsafe.Slice((*float32)(unsafe.Pointer(&b[8])), l.rows*l.dim)
	a.report("vectors", fmt.Sprintf("%d × %d (%s)", l.rows, l.dim, mb(len(b))))
	return l, nil
}

// load fetches the vectors, opens the device, indexes them and runs a
// first search, reporting each stage.
func (a *app) load() error {
	l, err := a.fetchVectors()
	if err != nil {
		return err
	}
	ctx := context.Background()
	cfg := engine.Config{Dim: l.dim, Metric: umbra.Cosine}
	switch param("device") {
	case "cpu":
		cfg.Device = engine.CPU
	case "auto":
		cfg.Device = engine.Auto
	default:
		cfg.Device = engine.GPU
	}
	if cfg.Device != engine.CPU {
		// The probe (adapter, its pipelines, the self-test) is the
		// engine's, once per page: run here, it reports its stages, and
		// engine.New below finds it done. Its self-test checks exactly
		// what this page runs — the vectors' dimension and the index's
		// metric — so that the index's pipelines are the self-test's,
		// built once and checked before use (on a software adapter each
		// pipeline takes seconds to build).
		webgpu.ProbeFor(ctx, webgpu.ProbeScope{Dims: []int{l.dim}, Metrics: []core.Metric{cfg.Metric}}, a.report)
		a.report("index", fmt.Sprintf("the index's pipelines (dimension %d)", l.dim))
	} else {
		a.report("index", "the CPU fallback (?device=cpu)")
	}
	l.ix, err = engine.New(ctx, cfg)
	if err != nil && cfg.Device == engine.GPU {
		l.fellBack = err.Error()
		cfg.Device = engine.CPU
		a.report("index", "the CPU fallback: "+l.fellBack)
		l.ix, err = engine.New(ctx, cfg)
	}
	if err != nil {
		return err
	}
	a.report("upload", fmt.Sprintf("%d rows on the %s", l.rows, strings.ToUpper(l.ix.Info().Device.String())))
	if _, err := l.ix.Add(ctx, umbra.Flat(l.data, l.dim)); err != nil {
		return err
	}
	k := min(10, l.rows)
	a.report("search", fmt.Sprintf("row 0, k %d", k))
	t := time.Now()
	if _, err := l.ix.Search(ctx, l.data[:l.dim], k); err != nil {
		return fmt.Errorf("the first search: %w", err)
	}
	l.loadMs = float64(time.Since(a.start).Microseconds()) / 1000
	a.report("search", fmt.Sprintf("row 0, k %d: %.0f ms", k, float64(time.Since(t).Microseconds())/1000))
	a.mu.Lock()
	a.l = l
	a.mu.Unlock()
	a.report("ready", fmt.Sprintf("%.1f s", l.loadMs/1000))
	return nil
}

// ready returns the indexed set, or why there is none yet.
func (a *app) ready() (*loaded, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.failed != nil:
		return nil, fmt.Errorf("umbra failed to start: %w", a.failed)
	case a.l == nil:
		return nil, fmt.Errorf("umbra is not ready (stage %q): await umbra.ready", a.stage)
	}
	return a.l, nil
}

func (a *app) info(args []js.Value) (any, error) {
	if err := webapi.Arity("umbra.info()", values(args), 0); err != nil {
		return nil, err
	}
	l, err := a.ready()
	if err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		m := map[string]any{"backend": "loading", "stage": a.stage}
		if a.failed != nil {
			m["backend"], m["reason"] = "failed", a.failed.Error()
		}
		return js.ValueOf(m), nil
	}
	in := l.ix.Info()
	backend, adapter, reason := "cpu", "", in.Reason
	if in.Device == engine.GPU {
		backend, adapter = "gpu", in.Adapter.String()
	}
	if l.fellBack != "" {
		reason = l.fellBack
	}
	return js.ValueOf(map[string]any{"backend": backend, "adapter": adapter, "reason": reason,
		"rows": l.rows, "dim": l.dim, "loadMs": l.loadMs, "source": l.source, "stage": "ready"}), nil
}

func (a *app) row(args []js.Value) (any, error) {
	l, err := a.ready()
	if err != nil {
		return nil, err
	}
	i, err := webapi.Row(values(args), l.rows)
	if err != nil {
		return nil, err
	}
	out := js.Global().Get("Float32Array").New(l.dim)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&l.data[i*l.dim])), 4*l.dim)
	js.CopyBytesToJS(js.Global().Get("Uint8Array").New(out.Get("buffer")), b)
	return out, nil
}

// search answers umbra.search(query, k) with a Promise. The arguments are
// checked and copied now (a bad one rejects the Promise); the search runs
// on its own goroutine (a JavaScript callback must not block).
func (a *app) search(args []js.Value) any {
	var q []float32
	var k int
	var l *loaded
	err := guard("umbra.search(query, k)", func() error {
		var err error
		if l, err = a.ready(); err != nil {
			return err
		}
		q, k, err = webapi.Search(values(args), l.dim)
		return err
	})
	var resolve, reject js.Value
	executor := js.FuncOf(func(_ js.Value, pr []js.Value) any {
		resolve, reject = pr[0], pr[1]
		return nil
	})
	p := js.Global().Get("Promise").New(executor)
	executor.Release()
	if err != nil {
		reject.Invoke(jsError(err))
		return p
	}
	go func() {
		var out js.Value
		err := guard("umbra.search(query, k)", func() error {
			hits, err := l.ix.Search(context.Background(), q, k)
			if err != nil {
				return err
			}
			list := make([]any, len(hits))
			for i, h := range hits {
				list[i] = map[string]any{"id": float64(h.ID), "score": float64(h.Score)}
			}
			out = js.ValueOf(list)
			return nil
		})
		if err != nil {
			reject.Invoke(jsError(err))
			return
		}
		resolve.Invoke(out)
	}()
	return p
}

// guard runs f, turning a panic (syscall/js panics with a js.Error when
// JavaScript throws, or on a value of the wrong type) into an error, so
// that none ends the program.
func guard(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(js.Error); ok {
				err = fmt.Errorf("%s: %s", what, message(e.Value))
				return
			}
			err = fmt.Errorf("%s: internal error: %v", what, r)
		}
	}()
	return f()
}

// jsError is err as a JavaScript error: a webapi.Error as the class it
// names (TypeError, RangeError), any other as an Error.
func jsError(err error) js.Value {
	kind := "Error"
	var we *webapi.Error
	if errors.As(err, &we) {
		kind = we.Kind
	}
	return js.Global().Get(kind).New(err.Error())
}

// thrower wraps a raw entry point (which returns {value} or {error:
// Error}) in a function that returns the value or throws the error: Go
// cannot throw into JavaScript itself.
var thrower = js.Global().Get("Function").New("raw", `return function (...args) {
	const r = raw(...args);
	if (r.error !== undefined) throw r.error;
	return r.value;
};`)

// syncEntry is a synchronous entry point named call: f's error is thrown,
// and a panic inside f is caught and thrown as an Error.
func syncEntry(call string, f func(args []js.Value) (any, error)) js.Value {
	raw := js.FuncOf(func(_ js.Value, args []js.Value) any {
		var v any
		err := guard(call, func() error {
			var err error
			v, err = f(args)
			return err
		})
		r := js.Global().Get("Object").New()
		if err != nil {
			r.Set("error", jsError(err))
			return r
		}
		r.Set("value", v)
		return r
	})
	return thrower.Invoke(raw)
}

// values are args as webapi reads them.
func values(args []js.Value) []webapi.Value {
	out := make([]webapi.Value, len(args))
	for i, v := range args {
		out[i] = jsValue{v}
	}
	return out
}

// jsValue is a JavaScript value as webapi reads it. A value passed in
// may be anything a caller builds — a Proxy, an object with throwing
// getters — so every read of it goes through a call (Reflect.get, not
// js.Value.Get or Index): syscall/js catches an exception thrown inside
// a call and panics with it (which guard turns into an error), while one
// thrown inside Get or Index unwinds through the Go program.
type jsValue struct{ v js.Value }

func (j jsValue) Type() (t webapi.Type) {
	defer func() {
		if recover() != nil { // a type syscall/js does not know
			t = webapi.Object
			if typeOf.Invoke(j.v).String() == "bigint" {
				t = webapi.BigInt
			}
		}
	}()
	switch j.v.Type() {
	case js.TypeNull:
		return webapi.Null
	case js.TypeBoolean:
		return webapi.Boolean
	case js.TypeNumber:
		return webapi.Number
	case js.TypeString:
		return webapi.String
	case js.TypeSymbol:
		return webapi.Symbol
	case js.TypeObject:
		return webapi.Object
	case js.TypeFunction:
		return webapi.Function
	}
	return webapi.Undefined
}

func (j jsValue) Float() float64 { return j.v.Float() }

func (j jsValue) Length() int {
	n := reflectGet.Invoke(j.v, "length")
	if n.Type() != js.TypeNumber {
		return -1
	}
	return n.Int()
}

func (j jsValue) Index(i int) webapi.Value { return jsValue{reflectGet.Invoke(j.v, i)} }

// Floats reads a genuine Float32Array or Float64Array at once.
func (j jsValue) Floats() ([]float64, bool) {
	a := typedFloats.Invoke(j.v)
	if a.IsNull() {
		return nil, false
	}
	xs := make([]float64, a.Get("length").Int())
	if len(xs) > 0 {
		js.CopyBytesToGo(unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), 8*len(xs)), js.Global().Get("Uint8Array").New(a.Get("buffer")))
	}
	return xs, true
}

// Class is the value's class as Object.prototype.toString names it
// ("[object Float32Array]" → "Float32Array").
func (j jsValue) Class() string {
	s := objectToString.Call("call", j.v).String()
	if len(s) > len("[object ]") {
		return s[len("[object ") : len(s)-1]
	}
	return s
}

var (
	objectToString = js.Global().Get("Object").Get("prototype").Get("toString")
	reflectGet     = js.Global().Get("Reflect").Get("get")
	typeOf         = js.Global().Get("Function").New("v", "return typeof v;")
	// typedFloats copies a genuine Float32Array or Float64Array (not a
	// Proxy of one) into a new Float64Array, reading its length with
	// the typed arrays' own getter (not a "length" the value may
	// define); null for anything else.
	typedFloats = js.Global().Get("Function").New(`
		const length = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Int8Array.prototype), "length").get;
		return function (v) {
			if (!ArrayBuffer.isView(v) || !(v instanceof Float32Array || v instanceof Float64Array)) return null;
			const out = new Float64Array(length.call(v));
			out.set(v);
			return out;
		};`).Invoke()
)
