package main

import (
	"encoding/json"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
	"github.com/umbravec/umbra/internal/testkit"
)

func TestProbeJSON(t *testing.T) {
	t.Parallel()
	// The text report runs beside the JSON one: each probes every
	// adapter (seconds of CPU on a software adapter) and neither waits
	// on the other.
	waitText := startUmbra(t, "probe")
	r := runUmbra(t, "probe", "--json")
	text := waitText()
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "%s", r)
	for _, key := range []string{"gpu_support", "selection", "adapters", "auto", "why", "hint", "findings", "cpu_kernel"} {
		assert.Contains(t, doc, key)
	}
	var p probeJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p))
	assert.Equal(t, engine.GPUSupport(), p.GPUSupport)
	for i, a := range p.Adapters {
		t.Logf("adapter %d: %s (%s, %s) works=%v eligible=%v %s", i, a.Name, a.Backend, a.Type, a.Works, a.AutoEligible, a.Error)
		assert.NotEmpty(t, a.Backend)
		assert.Contains(t, []string{"discrete", "integrated", "cpu", "unknown"}, a.Type)
		assert.NotNil(t, a.Features)
		name := strings.ToLower(a.Name + " " + a.Driver)
		if strings.Contains(name, "llvmpipe") || strings.Contains(name, "lavapipe") || strings.Contains(name, "swiftshader") {
			assert.Equal(t, "cpu", a.Type, "%s is a software adapter", a.Name)
			assert.True(t, a.Software)
			assert.False(t, a.AutoEligible, "Auto never chooses a software adapter")
		}
		if a.Works {
			assert.NotZero(t, a.Limits.MaxStorageBindingBytes, a.Name)
			assert.Empty(t, a.Error)
			// Every variant the probe tried is listed with its
			// verdict: exactly one scores variant chosen (the one in
			// "chosen"), the fused top-k's and gemm.wgsl's outcomes.
			kernels := map[string]int{}
			chosen := 0
			for _, v := range a.Variants {
				kernels[v.Kernel]++
				assert.Equal(t, v.Passed, v.Error == "", "%s %s: an error exactly when it failed", v.Kernel, v.Variant)
				if v.Kernel == "scores" && v.Chosen {
					chosen++
					assert.True(t, strings.HasPrefix(v.Variant, fmt.Sprintf("team %d, ", a.Chosen.Team)), "%s: %+v", v.Variant, a.Chosen)
				}
				if v.Passed && !v.Chosen {
					assert.NotEmpty(t, v.Why, "%s %s: passed but not chosen, and no reason", v.Kernel, v.Variant)
				}
			}
			assert.Equal(t, 1, chosen, "%s: one scores variant chosen", a.Name)
			assert.Positive(t, kernels["scores"], a.Name)
			assert.Equal(t, 1, kernels["fused"], a.Name)
			assert.Equal(t, 1, kernels["gemm"], a.Name)
			assert.Positive(t, a.Chosen.Team, a.Name)
		} else {
			assert.NotEmpty(t, a.Error)
		}
		assert.NotNil(t, a.Variants, "variants is a list, [] when none ran")
	}
	eligible := slices.IndexFunc(p.Adapters, func(a probedAdapterJSON) bool { return a.AutoEligible })
	if eligible < 0 {
		require.Equal(t, exitFailure, r.code, "no adapter Auto would use: exit 1\n%s", r)
		assert.Nil(t, p.Auto)
		assert.Nil(t, doc["auto"])
		assert.NotEmpty(t, p.Why)
		require.NotEmpty(t, p.Findings)
		line := requireErrorLine(t, r)
		assert.Contains(t, line, "no adapter that --device auto would use")
		soft := slices.ContainsFunc(p.Adapters, func(a probedAdapterJSON) bool { return a.Works && a.Software })
		if soft {
			assert.True(t, slices.ContainsFunc(p.Findings, func(f finding) bool { return f.Cause == causeSoftwareOnly }), "%+v", p.Findings)
		}
	} else {
		require.Equal(t, exitOK, r.code, "%s", r)
		require.NotNil(t, p.Auto)
		assert.Equal(t, eligible, *p.Auto, "Auto takes the first eligible adapter in rank order")
		assert.Empty(t, p.Findings)
	}

	// The text report says the same.
	assert.Equal(t, r.code, text.code, "%s", text)
	assert.Contains(t, text.stdout, "Auto would use: ")
	for _, a := range p.Adapters {
		assert.Contains(t, text.stdout, a.Name)
	}
	if p.Auto == nil {
		assert.Contains(t, text.stdout, "Likely causes")
		for _, f := range p.Findings {
			assert.Contains(t, text.stdout, "["+f.Cause+"]")
		}
	}
}

func TestProbeSelectionMatchingNothing(t *testing.T) {
	t.Parallel()
	if !engine.GPUSupport() {
		t.Skip("built without the wgpu backend")
	}
	r := runUmbra(t, "probe", "--json", "--adapter", "no adapter is called this")
	require.Equal(t, exitFailure, r.code, "%s", r)
	var p probeJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p))
	assert.Empty(t, p.Adapters)
	assert.Equal(t, "no adapter is called this", p.Selection.Adapter)
	require.NotEmpty(t, p.Findings)
	assert.Equal(t, causeNoMatch, p.Findings[0].Cause)
	// The engine's advice, said in flags.
	assert.Contains(t, p.Hint, "--adapter")
	assert.NotRegexp(t, libraryWording, p.Hint)
	for _, f := range p.Findings {
		assert.NotRegexp(t, libraryWording, f.Hint, f.Cause)
	}

	// search --device gpu names the same failure; --device auto falls back.
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "d.npy", randomMatrix(rng, 10, 3), "")
	r = runUmbra(t, "search", "--data", data, "--queries", data, "--k", "1", "--device", "gpu", "--adapter", "no adapter is called this")
	require.Equal(t, exitFailure, r.code, "%s", r)
	line := requireErrorLine(t, r)
	assert.Contains(t, line, "umbra probe")
	assert.Contains(t, line, "--adapter", "the hint says which flag to loosen")
	assert.NotRegexp(t, libraryWording, line)
	s := decodeSearch(t, runUmbra(t, "search", "--data", data, "--queries", data, "--k", "1", "--adapter", "no adapter is called this", "--json"))
	assert.Equal(t, "cpu", s.Backend)
	assert.NotEmpty(t, s.Reason)
	assert.Contains(t, s.Hint, "--adapter")
	assert.NotRegexp(t, libraryWording, s.Hint)
	for i, res := range s.Results {
		assert.Equal(t, uint64(i), res.Hits[0].ID, "each row is its own nearest under cosine")
	}
	if runtime.GOOS == "linux" {
		r = runUmbra(t, "probe", "--backend", "metal")
		require.Equal(t, exitFailure, r.code, "%s", r)
		assert.Contains(t, r.stdout, "["+causeNoMatch+"]")
	}
}

// fakeSystem is a machine described by its files and environment.
type fakeSystem struct {
	os    string
	env   map[string]string
	files []string
	open  map[string]bool
}

func (f fakeSystem) goos() string             { return f.os }
func (f fakeSystem) getenv(key string) string { return f.env[key] }
func (f fakeSystem) glob(pattern string) []string {
	var out []string
	for _, p := range f.files {
		if ok, _ := path.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	return out
}
func (f fakeSystem) openable(p string) bool { return f.open[p] }

func causes(fs []finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Cause)
	}
	return out
}

func TestDiagnose(t *testing.T) {
	t.Parallel()
	lavapipe := probe.Adapter{
		Adapter: diag.AdapterInfo{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", API: "vulkan", Type: "cpu"},
		Limits:  gpu.Limits{MaxStorageBindingBytes: 128 << 20, MaxBufferBytes: 2 << 30, MaxWorkgroupsPerDim: 65535, MaxInvocations: 1024},
		Works:   true,
	}
	broken := probe.Adapter{
		Adapter: diag.AdapterInfo{Name: "NVIDIA GeForce RTX 3050", API: "vulkan", Type: "discrete"},
		Limits:  gpu.Limits{MaxStorageBindingBytes: 64 << 20, MaxBufferBytes: 2 << 30, MaxWorkgroupsPerDim: 65535, MaxInvocations: 1024},
		Error:   "GPU failure: compile scores shader: boom",
	}
	machine := fakeSystem{os: "linux", env: map[string]string{"HOME": "/home/u"}, files: []string{
		"/usr/lib/x86_64-linux-gnu/libvulkan.so.1",
		"/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
		"/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
		"/dev/dri/renderD128",
	}, open: map[string]bool{"/dev/dri/renderD128": true}}
	without := func(s fakeSystem, drop ...string) fakeSystem {
		s.files = slices.DeleteFunc(slices.Clone(s.files), func(f string) bool {
			return slices.ContainsFunc(drop, func(d string) bool { return strings.Contains(f, d) })
		})
		return s
	}
	tests := []struct {
		name string
		rep  probe.Report
		sel  engine.AdapterSelect
		sys  fakeSystem
		gpu  bool
		want []string
		in   string // in some finding's detail
	}{
		{"built without gpu", probe.Report{Reason: "built without GPU support"}, engine.AdapterSelect{}, machine, false,
			[]string{causeNoGPUSupport}, "built without"},
		{"bare container", probe.Report{Reason: "no GPU adapter found"}, engine.AdapterSelect{}, fakeSystem{os: "linux"}, true,
			[]string{causeNoLoader, causeNoDriver, causeNoDevice}, "libvulkan.so.1"},
		{"only lavapipe installed, no GPU", probe.Report{Adapters: []probe.Adapter{lavapipe}}, engine.AdapterSelect{},
			without(machine, "radeon", "renderD"), true, []string{causeNoDriver, causeNoDevice, causeSoftwareOnly}, "lvp_icd"},
		{"GPU node not openable", probe.Report{Adapters: []probe.Adapter{lavapipe}}, engine.AdapterSelect{},
			fakeSystem{os: "linux", files: machine.files}, true, []string{causeDevicePerm, causeSoftwareOnly}, "renderD128"},
		{"driver override", probe.Report{Adapters: []probe.Adapter{lavapipe}}, engine.AdapterSelect{},
			fakeSystem{os: "linux", env: map[string]string{"VK_ICD_FILENAMES": "/opt/x.json"}, files: machine.files, open: machine.open}, true,
			[]string{causeNoDriver, causeSoftwareOnly}, "VK_ICD_FILENAMES=/opt/x.json"},
		{"hardware adapter failed", probe.Report{Adapters: []probe.Adapter{broken, lavapipe}}, engine.AdapterSelect{},
			without(machine, "libvulkan", "icd.d"), true, []string{causeSoftwareOnly, causeProbeFailed, causeLimitsTooSmall}, "64 MiB < 128 MiB"},
		{"selection matches nothing", probe.Report{Reason: "no adapter matches backend dx12"}, engine.AdapterSelect{Backend: "dx12"},
			machine, true, []string{causeNoMatch}, "dx12"},
		{"other OS: report only", probe.Report{Reason: "no GPU adapter found", Hint: umbra.Hint{Code: umbra.HintNoAdapter}}, engine.AdapterSelect{},
			fakeSystem{os: "windows"}, true, []string{causeNoAdapter}, "no GPU adapter found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := diagnoseBuild(tc.rep, tc.sel, tc.sys, tc.gpu)
			assert.Equal(t, tc.want, causes(got))
			found := false
			for _, f := range got {
				assert.NotEmpty(t, f.Hint, f.Cause)
				found = found || strings.Contains(f.Detail, tc.in)
			}
			assert.True(t, found, "no finding mentions %q: %+v", tc.in, got)
		})
	}
}

// TestProbeJSONShape pins the bytes `umbra probe --json` prints for a
// machine with one working adapter, every key in its documented order
// (cmd/umbra/README.md), whether or not this machine has an adapter: the
// full report comes from internal/probe, not from the public
// diag.ProbeReport, and must not lose a field on the way.
func TestProbeJSONShape(t *testing.T) {
	rep := probe.Report{Auto: 0, Adapters: []probe.Adapter{{
		Adapter: diag.AdapterInfo{Name: "GPU", Vendor: "V", VendorID: 0x10de, DeviceID: 7, API: "vulkan", Type: "discrete", Driver: "D"},
		Limits: gpu.Limits{MaxStorageBindingBytes: 128 << 20, MaxBufferBytes: 256 << 20, MaxWorkgroupsPerDim: 65535, MaxInvocations: 1024,
			Team: 8, Subgroups: true, FusedK: 256, FusedBatchK: 224, Gemm: true, Timestamps: true},
		Features: []string{"timestamp-query"},
		Works:    true, Eligible: true, Elapsed: 12345 * time.Microsecond,
		Checks: []gpu.VariantCheck{{Kernel: "scores", Variant: "team 8", Passed: true, Chosen: true, Why: "fastest", Time: 1200 * time.Microsecond}},
	}}}
	out := probeReport(rep, engine.AdapterSelect{}, fakeSystem{os: "linux"})
	out.CPUKernel = "k" // the machine's own
	b, err := json.Marshal(out)
	require.NoError(t, err)
	want := `{"gpu_support":` + fmt.Sprint(engine.GPUSupport()) + `,"selection":{"backend":"","adapter":"","power":"high"},` +
		`"adapters":[{"name":"GPU","vendor":"V","vendor_id":4318,"device_id":7,"backend":"vulkan","type":"discrete","driver":"D",` +
		`"software":false,"limits":{"max_storage_binding_bytes":134217728,"max_buffer_bytes":268435456,"max_workgroups_per_dim":65535,"max_invocations_per_workgroup":1024},` +
		`"features":["timestamp-query"],"works":true,"error":"","auto_eligible":true,"probe_ms":12.3,` +
		`"chosen":{"team":8,"subgroups":true,"staged_queries":false,"fused_k":256,"fused_batch_k":224,"gemm":true,"timestamps":true},` +
		`"variants":[{"kernel":"scores","variant":"team 8","passed":true,"error":"","chosen":true,"why":"fastest","time_ms":1.2}]}],` +
		`"auto":0,"why":"GPU (vulkan, discrete) is the first adapter in preference order (discrete, integrated, unknown, software; native APIs before GL) that passed its probe and is not a software adapter",` +
		`"hint":"","findings":[],"cpu_kernel":"k"}`
	assert.Equal(t, want, string(b))
}
