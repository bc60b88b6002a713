//go:build js && wasm

// Command judge runs in headless Chromium (internal/webgpu's second-judge
// test serves it): it compiles every shader variant umbra can choose with
// the browser's WebGPU compiler and checks each one's answers against the
// CPU on random data from the page's ?seed= (with ?full=1 every team
// width, else the team the probe tries first), then publishes the results as
// JSON in window.umbraJudge.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/shaders"
	"github.com/umbravec/umbra/internal/webgpu"
)

// Result is one variant's verdict.
type Result struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	MS    int64  `json:"ms"`
}

// Report is what the page publishes.
type Report struct {
	Adapter   string   `json:"adapter"`
	Software  bool     `json:"software"`
	Features  []string `json:"features"`
	Subgroups bool     `json:"subgroups"`
	Error     string   `json:"error,omitempty"`
	Compiles  int      `json:"compiles"`
	CompileMS int64    `json:"compileMs"`
	Results   []Result `json:"results"`
}

func main() {
	seed, _ := strconv.ParseUint(js.Global().Get("URLSearchParams").New(js.Global().Get("location").Get("search")).Call("get", "seed").String(), 10, 64)
	full := js.Global().Get("URLSearchParams").New(js.Global().Get("location").Get("search")).Call("get", "full").String() == "1"
	go func() {
		rep := run(seed, full)
		b, _ := json.Marshal(rep)
		js.Global().Set("umbraJudge", string(b))
	}()
	select {}
}

func run(seed uint64, full bool) (rep Report) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d, err := webgpu.Open(context.Background())
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.Adapter, rep.Software = d.Info().String(), d.Info().Software()
	rep.Features, rep.Subgroups = d.Features(), d.HasSubgroups()
	log := func(format string, args ...any) {
		js.Global().Get("console").Call("log", fmt.Sprintf("judge: "+format, args...))
	}

	// The checks are listed first, with the pipelines each one's indexes
	// will use; those are compiled all at once (the browser builds them in
	// parallel), then each check runs on pipelines already built.
	type check struct {
		name string
		v    gpu.Variant
		f    func() error
	}
	var checks []check
	var prep []gpu.Prepared
	add := func(name string, v gpu.Variant, dim int, m core.Metric, prec core.Precision, f func() error) {
		checks = append(checks, check{name, v, f})
		stride := (dim + 3) &^ 3
		if prec != core.F32 {
			c, err := exact.NewCompressed(prec, dim)
			if err != nil {
				panic(err)
			}
			stride = c.WordsPerRow()
		}
		prep = append(prep, gpu.Prepared{Variant: v, Stride: stride, Metric: m, Prec: prec})
	}
	metrics := []core.Metric{core.Dot, core.L2} // Cosine runs Dot's shaders
	reductions := []bool{false}
	if d.HasSubgroups() {
		reductions = append(reductions, true)
	}
	teams := shaders.TeamCandidates
	if !full {
		teams = []uint32{32} // the team the browser probe tries first
	}
	// Dimension 768 splits a row over every team width; at dimension 7 (2
	// vec4 a row) every team is 2 lanes wide, one shader, judged once.
	for _, sub := range reductions {
		for _, v := range shaders.Variants() {
			if !slices.Contains(teams, v.Team) {
				continue
			}
			for _, m := range metrics {
				add(fmt.Sprintf("scores+radix team=%d staged=%v subgroups=%v dim=768 metric=%v", v.Team, v.Staged, sub, m),
					gpu.Variant{Variant: v, Subgroups: sub}, 768, m, core.F32, func() error { return d.CheckVariant(r, 768, m) })
			}
		}
		for _, staged := range []bool{false, true} {
			for _, m := range metrics {
				add(fmt.Sprintf("scores+radix team=2 staged=%v subgroups=%v dim=7 metric=%v", staged, sub, m),
					gpu.Variant{Variant: shaders.Variant{Team: 8, Staged: staged}, Subgroups: sub}, 7, m, core.F32, func() error { return d.CheckVariant(r, 7, m) })
			}
		}
	}
	for _, team := range teams {
		for _, m := range metrics {
			add(fmt.Sprintf("fused team=%d dim=768 metric=%v", team, m),
				gpu.Variant{Variant: shaders.Variant{Team: team}, Fused: true}, 768, m, core.F32, func() error { return d.CheckFused(r, 768, m) })
		}
		// quant.wgsl does not know the metric; the host's certified
		// search does, so the metrics alternate.
		for i, prec := range []core.Precision{core.F16, core.Int8} {
			add(fmt.Sprintf("quant %v team=%d dim=768 metric=%v", prec, team, metrics[i]),
				gpu.Variant{Variant: shaders.Variant{Team: team}}, 768, metrics[i], prec, func() error { return d.CheckCompressed(r, prec, 768, metrics[i]) })
		}
	}
	for _, m := range metrics {
		add(fmt.Sprintf("fused team=2 dim=7 metric=%v", m),
			gpu.Variant{Variant: shaders.Variant{Team: 8}, Fused: true}, 7, m, core.F32, func() error { return d.CheckFused(r, 7, m) })
	}
	for i, prec := range []core.Precision{core.F16, core.Int8} {
		add(fmt.Sprintf("quant %v team=2 dim=7 metric=%v", prec, metrics[1-i]),
			gpu.Variant{Variant: shaders.Variant{Team: 8}}, 7, metrics[1-i], prec, func() error { return d.CheckCompressed(r, prec, 7, metrics[1-i]) })
	}

	// The subnormal guard (the driver's, as wgpu's tests run it): tiny
	// dot products scored exactly however the browser's GPU treats
	// subnormals, and what no scaling can keep exact refused.
	add("subnormal guard team=32 dim=32 metric=dot", gpu.Variant{Variant: shaders.Variant{Team: 32}}, 32, core.Dot, core.F32,
		func() error { return d.CheckSubnormal(r) })

	start := time.Now()
	// A pipeline the compiler rejects fails its check below, by name.
	perr := d.Precompile(prep)
	rep.CompileMS, rep.Compiles = time.Since(start).Milliseconds(), webgpu.Stats.Compiles
	log("compiled %d pipelines in %d ms (first error: %v)", rep.Compiles, rep.CompileMS, perr)
	for _, c := range checks {
		start := time.Now()
		st0 := webgpu.Stats
		err := d.SetVariant(c.v)
		if err == nil {
			err = c.f()
		}
		res := Result{Name: c.name, OK: err == nil, MS: time.Since(start).Milliseconds()}
		if err != nil {
			res.Error = err.Error()
		}
		rep.Results = append(rep.Results, res)
		log("%s: ok %v %d ms (compiles %d, awaiting the browser %d ms) %s", c.name, res.OK, res.MS, webgpu.Stats.Compiles-st0.Compiles,
			(webgpu.Stats.Await - st0.Await).Milliseconds(), res.Error)
	}
	return rep
}
