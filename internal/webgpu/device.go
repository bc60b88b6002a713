//go:build js && wasm

package webgpu

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
)

// Supported reports whether the page's navigator has WebGPU at all.
func Supported() bool {
	nav := js.Global().Get("navigator")
	return nav.Truthy() && nav.Get("gpu").Truthy()
}

var (
	probeOnce   sync.Once
	probeDev    *gpu.Device
	probeReport gpu.Report
)

// Probe opens the browser's preferred adapter, once per page, and returns
// its device with the variant that passed the self-test (nil when none
// did, or WebGPU is missing) and what the probe found. The self-test
// covers every metric at dimensions 7 and 768 (ProbeFor can narrow it).
func Probe(ctx context.Context) (*gpu.Device, gpu.Report) { return ProbeFor(ctx, ProbeScope{}, nil) }

// ProbeScope narrows the probe's self-test to what a page will use. On a
// software adapter every pipeline costs seconds to build (most of a
// page's start-up), and the self-test builds them for each dimension and
// metric it checks.
type ProbeScope struct {
	// Dims are the dimensions the self-test checks. Empty: 7 (a short
	// row) and 768 (the common width), whose pipelines stand for every
	// dimension's. A page whose indexes all have one dimension can give
	// just it: the self-test then builds and checks exactly the
	// pipelines those indexes run.
	Dims []int
	// Metrics are those the self-test checks (Cosine counts as Dot,
	// whose shaders it runs). Empty: every metric. The device refuses an
	// index of a metric it did not check (gpu.ErrFailed), so that none
	// runs on a variant not self-tested for it.
	Metrics []core.Metric
}

// ProbeFor is Probe with the self-test narrowed to scope, telling report
// (when not nil) each stage as it starts, for a page that shows its
// progress: "adapter" (requesting the adapter and device; reported again
// with the adapter's name once open), then for each variant tried
// "compile" (building the self-test's pipelines, their count in the
// detail) and "self-test". The probe takes the first variant that passes
// and times nothing (gpu.Policy.FirstPass). Only the first call of a page
// probes: a later one, Probe's included, returns the first's device and
// report, with its scope, and reports nothing.
func ProbeFor(ctx context.Context, scope ProbeScope, report func(stage, detail string)) (*gpu.Device, gpu.Report) {
	if report == nil {
		report = func(string, string) {}
	}
	probeOnce.Do(func() {
		start := time.Now()
		report("adapter", "requesting a WebGPU adapter and device")
		d, err := Open(ctx)
		if err == nil {
			report("adapter", d.Info().String())
			d.SetPolicy(gpu.Policy{Dims: scope.Dims, Metrics: scope.Metrics, FirstPass: true, Report: report})
			err = d.Verify()
			d.SetPolicy(gpu.Policy{Dims: scope.Dims, Metrics: scope.Metrics, FirstPass: true})
			probeReport.Checks = d.Checks()
		}
		probeReport.Elapsed = time.Since(start)
		if d != nil {
			probeReport.Limits, probeReport.Features = d.Limits(), d.Features()
		}
		if err != nil {
			probeReport.Error = err.Error()
			return
		}
		probeReport.Works, probeDev = true, d
	})
	return probeDev, probeReport
}

// Open requests the adapter and a device with its largest limits and the
// subgroups feature where offered; the variant is the default (team 32,
// the tree reduction, no fused top-k) until Verify or SetVariant.
func Open(ctx context.Context) (d *gpu.Device, err error) {
	if !Supported() {
		return nil, fmt.Errorf("%w: this browser has no WebGPU (navigator.gpu is missing)", gpu.ErrNotBuilt)
	}
	err = try("open WebGPU", func() error {
		a, err := await(js.Global().Get("navigator").Get("gpu").Call("requestAdapter", obj("powerPreference", "high-performance")))
		if err != nil {
			return err
		}
		if !a.Truthy() {
			return fmt.Errorf("no WebGPU adapter (requestAdapter returned null)")
		}
		caps := gpu.Caps{Info: describe(a)}
		limits := a.Get("limits")
		want := obj()
		for _, name := range []string{"maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupsPerDimension",
			"maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupStorageSize", "maxComputeWorkgroupSizeX",
			"maxStorageBuffersPerShaderStage"} {
			want.Set(name, limits.Get(name))
		}
		feats := arr()
		a.Get("features").Call("forEach", js.FuncOf(func(_ js.Value, args []js.Value) any {
			caps.Features = append(caps.Features, args[0].String())
			return nil
		}))
		for _, f := range caps.Features {
			if f == "subgroups" {
				feats.Call("push", f)
				caps.Subgroups = true
			}
		}
		dev, err := await(a.Call("requestDevice", obj("requiredLimits", want, "requiredFeatures", feats, "label", "umbra")))
		if err != nil {
			return err
		}
		l := dev.Get("limits")
		caps.Limits = gpu.Limits{
			MaxStorageBindingBytes: uint64(l.Get("maxStorageBufferBindingSize").Float()),
			MaxBufferBytes:         uint64(l.Get("maxBufferSize").Float()),
			MaxWorkgroupsPerDim:    uint32(l.Get("maxComputeWorkgroupsPerDimension").Int()),
			MaxInvocations:         uint32(l.Get("maxComputeInvocationsPerWorkgroup").Int()),
			MaxWorkgroupBytes:      uint32(l.Get("maxComputeWorkgroupStorageSize").Int()),
			MaxStorageBuffers:      uint32(l.Get("maxStorageBuffersPerShaderStage").Int()),
		}
		d = gpu.NewDevice(newAPI(dev), caps)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// describe reads GPUAdapterInfo into the neutral description. WebGPU
// names no API or device type: the API is "webgpu", and an adapter that
// says it is the fallback or is SwiftShader counts as a CPU ("cpu").
func describe(a js.Value) core.AdapterInfo {
	info := a.Get("info")
	str := func(name string) string {
		if !info.Truthy() {
			return ""
		}
		if v := info.Get(name); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	name := strings.TrimSpace(str("vendor") + " " + str("architecture"))
	if d := str("device"); d != "" {
		name = d
	}
	if desc := str("description"); desc != "" {
		name = desc
	}
	if name == "" {
		name = "WebGPU adapter"
	}
	typ := "unknown"
	fallbackAdapter := info.Truthy() && info.Get("isFallbackAdapter").Truthy() || a.Get("isFallbackAdapter").Truthy()
	if fallbackAdapter || strings.Contains(strings.ToLower(str("architecture")+" "+name), "swiftshader") {
		typ = "cpu"
	}
	return core.AdapterInfo{Name: name, Vendor: str("vendor"), API: "webgpu", Type: typ,
		Driver: strings.TrimSpace(str("architecture") + " " + str("description"))}
}
