//go:build js && wasm

package webgpu

import (
	"fmt"
	"strings"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// api is one WebGPU device as the driver's gpuplan.API: the calls, and
// the layouts, pipelines and bind groups they built.
type api struct {
	device, queue js.Value
	lost          js.Value // the device.lost promise's reason once it settled, else undefined
	layouts       map[string]js.Value
	pipes         map[string]*pipe
	binds         map[bindKey]js.Value
}

// buffer is a GPUBuffer as a gpuplan.Buffer.
type buffer struct {
	v    js.Value
	size uint64
}

func (b *buffer) Bytes() uint64 { return b.size }

// pipe is a GPUComputePipeline with its layout's name.
type pipe struct {
	v      js.Value
	layout string
	label  string
}

func (p *pipe) Label() string { return p.label }

// bindKey is a bind group: a layout and the buffers at its bindings.
type bindKey struct {
	layout string
	bufs   [8]*buffer
}

func newAPI(device js.Value) *api {
	a := &api{device: device, queue: device.Get("queue"), lost: js.Undefined(), layouts: map[string]js.Value{},
		pipes: map[string]*pipe{}, binds: map[bindKey]js.Value{}}
	var onLost js.Func
	onLost = js.FuncOf(func(_ js.Value, args []js.Value) any {
		a.lost = args[0]
		onLost.Release()
		return nil
	})
	device.Get("lost").Call("then", onLost)
	return a
}

// lostErr reports a lost device.
func (a *api) lostErr() error {
	if a.lost.IsUndefined() {
		return nil
	}
	return fmt.Errorf("%w: the WebGPU device was lost: %s", gpu.ErrFailed, jsString(a.lost.Get("message")))
}

// NewBuffer creates a buffer of size bytes (at least minBindingLen).
func (a *api) NewBuffer(label string, size uint64, usage gpuplan.Usage) (gpuplan.Buffer, error) {
	var b *buffer
	err := try("create "+label, func() error {
		size = (max(size, minBindingLen) + 3) &^ 3
		v := a.device.Call("createBuffer", obj("label", label, "size", float64(size), "usage", int(usage)))
		b = &buffer{v: v, size: size}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free destroys b and drops the bind groups that name it.
func (a *api) Free(b gpuplan.Buffer) {
	jb, ok := b.(*buffer)
	if !ok || jb == nil {
		return
	}
	_ = try("destroy buffer", func() error {
		for k := range a.binds {
			for _, x := range k.bufs {
				if x == jb {
					delete(a.binds, k)
					break
				}
			}
		}
		jb.v.Call("destroy")
		return nil
	})
}

// Write queues data into b at offset, at most writePiece bytes a call.
func (a *api) Write(b gpuplan.Buffer, offset uint64, data []byte) error {
	jb, ok := b.(*buffer)
	if !ok || jb == nil {
		return fmt.Errorf("%w: a write to no buffer of this device", gpu.ErrFailed)
	}
	return try("write buffer", func() error {
		for len(data) > 0 {
			n := min(len(data), writePiece)
			arr := js.Global().Get("Uint8Array").New(n)
			js.CopyBytesToJS(arr, data[:n])
			a.queue.Call("writeBuffer", jb.v, float64(offset), arr)
			data, offset = data[n:], offset+uint64(n)
		}
		return nil
	})
}

// layout returns the bind group layout named name, for bindings bs.
func (a *api) layout(name string, bs []shaders.Binding) js.Value {
	if l, ok := a.layouts[name]; ok {
		return l
	}
	entries := arr()
	for _, b := range bs {
		t := "storage"
		switch b.Kind {
		case shaders.ReadOnlyStorage:
			t = "read-only-storage"
		case shaders.Uniform:
			t = "uniform"
		}
		entries.Call("push", obj("binding", b.Binding, "visibility", 4 /* GPUShaderStage.COMPUTE */, "buffer", obj("type", t)))
	}
	l := a.device.Call("createBindGroupLayout", obj("label", "umbra "+name, "entries", entries))
	a.layouts[name] = l
	return l
}

// Pipelines compiles every spec not compiled yet, once per source and
// entry point, all at once: each shader module and
// createComputePipelineAsync is issued before any is awaited, so the
// browser may build them in parallel (on SwiftShader a pipeline takes
// from a quarter of a second to several seconds of CPU). A compile error
// (WGSL the browser's compiler rejects) comes back with the compiler's
// messages; the pipelines that did compile are kept.
func (a *api) Pipelines(specs ...gpuplan.PipeSpec) ([]gpuplan.Pipeline, error) {
	type pending struct {
		sp         gpuplan.PipeSpec
		info, pipe js.Value
	}
	var todo []pending
	seen := map[string]bool{}
	start := time.Now()
	err := try("compile shaders", func() error {
		for _, sp := range specs {
			key := sp.Key()
			if _, ok := a.pipes[key]; ok || seen[key] {
				continue
			}
			seen[key] = true
			src := sp.Source
			if sp.Subgroups {
				// WebGPU requires the directive before a shader uses
				// subgroup built-ins (naga needs none; WGSL's enable must
				// precede every declaration).
				src = "enable subgroups;\n" + src
			}
			mod := a.device.Call("createShaderModule", obj("label", sp.Label, "code", src))
			pl := a.device.Call("createPipelineLayout", obj("bindGroupLayouts", arr(a.layout(sp.Layout, sp.Bindings))))
			p := a.device.Call("createComputePipelineAsync", obj("label", sp.Label+":"+sp.Entry, "layout", pl,
				"compute", obj("module", mod, "entryPoint", sp.Entry)))
			todo = append(todo, pending{sp, mod.Call("getCompilationInfo"), p})
		}
		return nil
	})
	// Every promise issued is awaited, even after a failure, so none
	// settles unobserved.
	for _, p := range todo {
		perr := try("compile "+p.sp.Label, func() error {
			info, err := await(p.info)
			if err != nil {
				return err
			}
			var msgs []string
			each := js.FuncOf(func(_ js.Value, args []js.Value) any {
				m := args[0]
				if m.Get("type").String() == "error" {
					msgs = append(msgs, fmt.Sprintf("%d:%d: %s", m.Get("lineNum").Int(), m.Get("linePos").Int(), m.Get("message").String()))
				}
				return nil
			})
			info.Get("messages").Call("forEach", each)
			each.Release()
			v, perr := await(p.pipe)
			if len(msgs) > 0 {
				return fmt.Errorf("WGSL rejected: %s", strings.Join(msgs, "; "))
			}
			if perr != nil {
				return perr
			}
			a.pipes[p.sp.Key()] = &pipe{v: v, layout: p.sp.Layout, label: p.sp.Label + ":" + p.sp.Entry}
			return nil
		})
		if err == nil {
			err = perr
		}
	}
	Stats.Compiles += len(todo)
	Stats.Compile += time.Since(start)
	if err != nil {
		return nil, err
	}
	out := make([]gpuplan.Pipeline, len(specs))
	for i, sp := range specs {
		out[i] = a.pipes[sp.Key()]
	}
	return out, nil
}

// Stats counts pipeline compiles and the time spent in them and in
// awaiting promises (tests; one goroutine).
var Stats struct {
	Compiles       int
	Compile, Await time.Duration
}

// bind returns the bind group of p's layout over bufs, made once per set
// of buffers (Free drops those that name a freed buffer).
func (a *api) bind(p *pipe, bufs []gpuplan.Buffer) (js.Value, error) {
	k := bindKey{layout: p.layout}
	if len(bufs) > len(k.bufs) {
		return js.Value{}, fmt.Errorf("%w: %s binds %d buffers", gpu.ErrFailed, p.label, len(bufs))
	}
	entries := arr()
	for i, b := range bufs {
		jb, ok := b.(*buffer)
		if !ok || jb == nil {
			return js.Value{}, fmt.Errorf("%w: %s binds no buffer of this device at %d", gpu.ErrFailed, p.label, i)
		}
		k.bufs[i] = jb
		entries.Call("push", obj("binding", i, "resource", obj("buffer", jb.v)))
	}
	if bg, ok := a.binds[k]; ok {
		return bg, nil
	}
	bg := a.device.Call("createBindGroup", obj("label", p.label, "layout", a.layouts[p.layout], "entries", entries))
	a.binds[k] = bg
	return bg, nil
}

// Submit encodes w, submits it and reads back what it asks. WebGPU has
// no timestamps inside a pass, so Work.Time is not honoured.
func (a *api) Submit(w gpuplan.Work, traced bool) (done gpuplan.Done, err error) {
	err = try("submit", func() error {
		enc := a.device.Call("createCommandEncoder")
		if len(w.Pass) > 0 {
			pass := enc.Call("beginComputePass")
			for _, x := range w.Pass {
				p, ok := x.Pipe.(*pipe)
				if !ok || p == nil {
					return fmt.Errorf("%w: a dispatch without a pipeline of this device", gpu.ErrFailed)
				}
				bg, err := a.bind(p, x.Buffers)
				if err != nil {
					return err
				}
				pass.Call("setPipeline", p.v)
				pass.Call("setBindGroup", 0, bg)
				pass.Call("dispatchWorkgroups", x.X, x.Y, x.Z)
			}
			pass.Call("end")
		}
		for _, c := range w.Copies {
			src, _ := c.Src.(*buffer)
			dst, _ := c.Dst.(*buffer)
			if src == nil || dst == nil {
				return fmt.Errorf("%w: a copy between buffers not of this device", gpu.ErrFailed)
			}
			enc.Call("copyBufferToBuffer", src.v, float64(c.SrcOffset), dst.v, float64(c.DstOffset), float64(c.Size))
		}
		start := time.Now()
		a.queue.Call("submit", arr(enc.Call("finish")))
		if traced || w.Map == nil && w.Wait {
			if _, err := await(a.queue.Call("onSubmittedWorkDone")); err != nil {
				return err
			}
		}
		if traced {
			done.Kernel = time.Since(start)
			start = time.Now()
		}
		if w.Map != nil {
			mb, _ := w.Map.(*buffer)
			if mb == nil {
				return fmt.Errorf("%w: a read back of no buffer of this device", gpu.ErrFailed)
			}
			n := (w.MapBytes + 3) &^ 3
			if _, err := await(mb.v.Call("mapAsync", mapModeRead, 0, float64(n))); err != nil {
				return fmt.Errorf("mapping the readback buffer: %w", err)
			}
			out := make([]byte, n)
			js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(mb.v.Call("getMappedRange", 0, float64(n))))
			mb.v.Call("unmap")
			done.Data = out[:w.MapBytes]
		}
		if traced {
			done.Readback = time.Since(start)
		}
		return nil
	})
	return done, err
}

// Scope runs f inside validation and out-of-memory error scopes and
// returns the first error f or a scope reports.
func (a *api) Scope(what string, f func() error) error {
	if err := a.lostErr(); err != nil {
		return err
	}
	var ferr error
	err := try(what, func() error {
		a.device.Call("pushErrorScope", "out-of-memory")
		a.device.Call("pushErrorScope", "validation")
		ferr = try(what, f)
		var scopeErr error
		for i := 0; i < 2; i++ {
			v, err := await(a.device.Call("popErrorScope"))
			if err != nil && scopeErr == nil {
				scopeErr = err
			}
			if err == nil && v.Truthy() && scopeErr == nil {
				scopeErr = fmt.Errorf("%s", jsString(v))
				if i == 1 {
					scopeErr = fmt.Errorf("%w: %s: out of memory: %v", gpu.ErrTooLarge, what, scopeErr)
				}
			}
		}
		return scopeErr
	})
	if ferr != nil {
		return ferr
	}
	if err == nil {
		err = a.lostErr()
	}
	return err
}

var _ gpuplan.API = (*api)(nil)
