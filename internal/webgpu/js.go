//go:build js && wasm

package webgpu

import (
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/gpu"
)

// WebGPU's map mode flag (GPUMapMode) and what one call may move.
const (
	mapModeRead   = 0x1
	writePiece    = 16 << 20 // one queue write's most bytes
	minBindingLen = 16       // the smallest buffer bound (an empty allow bitmap)
)

// await blocks until the promise p settles and returns its value, or its
// rejection as an error.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	then := js.FuncOf(func(_ js.Value, args []js.Value) any {
		v := js.Undefined()
		if len(args) > 0 {
			v = args[0]
		}
		ch <- result{v: v}
		return nil
	})
	catch := js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "rejected"
		if len(args) > 0 {
			msg = jsString(args[0])
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	start := time.Now()
	p.Call("then", then, catch)
	r := <-ch
	Stats.Await += time.Since(start)
	then.Release()
	catch.Release()
	return r.v, r.err
}

// jsString is v as text: an Error's message, or String(v).
func jsString(v js.Value) string {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return m.String()
		}
	}
	return js.Global().Get("String").Invoke(v).String()
}

// try runs f and turns a JavaScript exception (syscall/js panics with a
// js.Error) or any other panic into an error wrapping gpu.ErrFailed.
func try(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(js.Error); ok {
				err = fmt.Errorf("%w: %s: %s", gpu.ErrFailed, what, jsString(e.Value))
				return
			}
			err = fmt.Errorf("%w: %s: %v", gpu.ErrFailed, what, r)
		}
	}()
	if err = f(); err != nil && !errors.Is(err, gpu.ErrFailed) && !errors.Is(err, gpu.ErrTooLarge) {
		err = fmt.Errorf("%w: %s: %w", gpu.ErrFailed, what, err)
	}
	return err
}

func obj(kv ...any) js.Value {
	o := js.Global().Get("Object").New()
	for i := 0; i+1 < len(kv); i += 2 {
		o.Set(kv[i].(string), kv[i+1])
	}
	return o
}

func arr(vs ...any) js.Value {
	a := js.Global().Get("Array").New()
	for _, v := range vs {
		a.Call("push", v)
	}
	return a
}
