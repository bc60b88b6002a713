package chroma

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/umbravec/umbra/diag"
)

// Server timing: with Config.ServerTiming a request's answer carries a
// Server-Timing header (the W3C one browsers' developer tools show) with
// the time each stage of the request took inside the server, so what a
// client measures can be split into the server's stages and the rest
// (the client, the network, the HTTP layers). A query's search is traced
// (diag.Trace) and its engine stages reported beside the server's.

// timing is one request's stages, in the order they ended.
type timing struct {
	last  time.Time
	parts []timingPart
	trace *diag.Trace
}

type timingPart struct {
	name string
	dur  time.Duration
}

type timingKey struct{}

// withTiming returns ctx carrying a new timing that starts now.
func withTiming(ctx context.Context) (context.Context, *timing) {
	t := &timing{last: time.Now()}
	return context.WithValue(ctx, timingKey{}, t), t
}

// timingOf is the timing ctx carries, or nil (server timing off).
func timingOf(ctx context.Context) *timing {
	t, _ := ctx.Value(timingKey{}).(*timing)
	return t
}

// mark ends the stage name: the time since the previous mark (or the
// request's start). A nil timing does nothing.
func (t *timing) mark(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.parts = append(t.parts, timingPart{name: name, dur: now.Sub(t.last)})
	t.last = now
}

// traced returns ctx with a diag.Trace the engine records into, when
// timing is on (ctx itself when off).
func (t *timing) traced(ctx context.Context) context.Context {
	if t == nil {
		return ctx
	}
	t.trace = &diag.Trace{}
	return diag.WithTrace(ctx, t.trace)
}

// header is the Server-Timing value: each stage in milliseconds, then the
// engine's stages of a traced search (prefixed "engine-"; the kernel's
// description names the device and the rows rescored). Descriptions hold
// no comma or semicolon, so a plain split reads the header.
func (t *timing) header() string {
	var b strings.Builder
	add := func(name string, d time.Duration, desc string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		if desc != "" {
			b.WriteString(`;desc="` + desc + `"`)
		}
		b.WriteString(";dur=")
		b.WriteString(strconv.FormatFloat(float64(d.Nanoseconds())/1e6, 'f', 3, 64))
	}
	var total time.Duration
	for _, p := range t.parts {
		add(p.name, p.dur, "")
		total += p.dur
	}
	add("total", total, "")
	if tr := t.trace; tr != nil && tr.Searches > 0 {
		add("engine-filter", tr.Filter, "")
		add("engine-kernel", tr.Kernel, fmt.Sprintf("%s (%s clock) %d rows rescored", tr.Device, tr.KernelClock, tr.Rescored))
		add("engine-select", tr.Select, "")
	} else if tr != nil && tr.Marshal+tr.Log+tr.Publish > 0 {
		add("engine-pack", tr.Pack, "")
		add("engine-assign", tr.Assign, "")
		add("engine-compress", tr.Compress, "")
		add("engine-upload", tr.Upload, "")
		add("engine-log", tr.Log, "")
		add("engine-publish", tr.Publish, "")
	}
	return b.String()
}
