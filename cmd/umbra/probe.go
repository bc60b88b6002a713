package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

type probeCmd struct {
	Selection cmdline.Adapter `embed:""`
	JSON      bool            `name:"json" help:"print the report as JSON (schema: cmd/umbra/README.md)"`
	Args      []string        `arg:"" optional:"" hidden:""`
}

func (*probeCmd) Help() string {
	return `List every adapter wgpu finds (Vulkan, Metal, DX12, GL): name, vendor,
type, backend, driver, key limits and features. Each one is probed the way
the engine does before trusting it: a device is created and the real
search shader is compiled, run on a small input and its answer checked.
The report ends with the adapter --device auto would use and why.

When Auto would use none (nothing works, or only software adapters such as
lavapipe or llvmpipe do), the report lists the likely causes with a fix for
each, and the exit status is 1.`
}

func (*probeCmd) Examples() []string {
	return []string{
		"umbra probe",
		"umbra probe --backend vulkan --json | jq '.adapters[] | {name, type, works}'",
	}
}

func (p *probeCmd) Validate() error { return noArguments(p.Args) }

func (p *probeCmd) Run(ctx context.Context, e *env) error {
	as := p.Selection.Select()
	done := e.progress.step("probing adapters")
	rep := probe.Run(ctx, probeSelect(as), probe.DefaultTimeout)
	done()
	if err := ctx.Err(); err != nil {
		return err
	}
	out := probeReport(rep, as, runningSystem{})
	if p.JSON {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		writeProbeText(e.stdout, out)
	}
	if out.Auto == nil {
		return errors.New("no adapter that --device auto would use: " + out.Why)
	}
	return nil
}

// probeSelect is sel in internal/probe's terms.
func probeSelect(sel engine.AdapterSelect) probe.Select {
	return probe.Select{LowPower: sel.LowPower, Name: sel.Name, Backend: sel.Backend}
}

// noArguments refuses positional arguments to a command that takes none.
func noArguments(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// adapterJSON describes one adapter in probe and search output.
type adapterJSON struct {
	Name     string `json:"name"`
	Vendor   string `json:"vendor"`
	VendorID uint32 `json:"vendor_id"`
	DeviceID uint32 `json:"device_id"`
	Backend  string `json:"backend"` // graphics API: vulkan, metal, dx12, gl
	Type     string `json:"type"`    // discrete, integrated, cpu, unknown
	Driver   string `json:"driver"`
}

func adapterOf(a diag.AdapterInfo) adapterJSON {
	return adapterJSON{Name: a.Name, Vendor: a.Vendor, VendorID: a.VendorID, DeviceID: a.DeviceID,
		Backend: a.API, Type: a.Type, Driver: a.Driver}
}

type limitsJSON struct {
	MaxStorageBindingBytes uint64 `json:"max_storage_binding_bytes"`
	MaxBufferBytes         uint64 `json:"max_buffer_bytes"`
	MaxWorkgroupsPerDim    uint32 `json:"max_workgroups_per_dim"`
	MaxInvocations         uint32 `json:"max_invocations_per_workgroup"`
}

func limitsOf(l gpu.Limits) limitsJSON {
	return limitsJSON{MaxStorageBindingBytes: l.MaxStorageBindingBytes, MaxBufferBytes: l.MaxBufferBytes,
		MaxWorkgroupsPerDim: l.MaxWorkgroupsPerDim, MaxInvocations: l.MaxInvocations}
}

type probedAdapterJSON struct {
	adapterJSON
	Software     bool       `json:"software"`
	Limits       limitsJSON `json:"limits"`
	Features     []string   `json:"features"`
	Works        bool       `json:"works"`
	Error        string     `json:"error"`
	AutoEligible bool       `json:"auto_eligible"`
	ProbeMS      float64    `json:"probe_ms"`
	// Chosen is the variant the device uses (empty when the probe
	// failed), Variants every self-test and timing behind the choice.
	Chosen   chosenJSON    `json:"chosen"`
	Variants []variantJSON `json:"variants"`
}

// chosenJSON is the variant of the kernels a probed device uses.
type chosenJSON struct {
	Team          uint32 `json:"team"`
	Subgroups     bool   `json:"subgroups"`
	StagedQueries bool   `json:"staged_queries"`
	FusedK        uint32 `json:"fused_k"`
	FusedBatchK   uint32 `json:"fused_batch_k"`
	Gemm          bool   `json:"gemm"`
	Timestamps    bool   `json:"timestamps"`
}

// variantJSON is one self-test (and timing) of the probe.
type variantJSON struct {
	Kernel  string  `json:"kernel"`
	Variant string  `json:"variant"`
	Passed  bool    `json:"passed"`
	Error   string  `json:"error"`
	Chosen  bool    `json:"chosen"`
	Why     string  `json:"why"`
	TimeMS  float64 `json:"time_ms"`
}

func variantsOf(cs []gpu.VariantCheck) []variantJSON {
	out := []variantJSON{}
	for _, c := range cs {
		out = append(out, variantJSON{Kernel: c.Kernel, Variant: c.Variant, Passed: c.Passed, Error: oneLine(c.Error),
			Chosen: c.Chosen, Why: oneLine(c.Why), TimeMS: math.Round(c.Time.Seconds()*1e6) / 1e3})
	}
	return out
}

type selectionJSON struct {
	Backend string `json:"backend"`
	Adapter string `json:"adapter"`
	Power   string `json:"power"`
}

// probeJSON is the report umbra probe prints; README.md documents it.
type probeJSON struct {
	GPUSupport bool                `json:"gpu_support"`
	Selection  selectionJSON       `json:"selection"`
	Adapters   []probedAdapterJSON `json:"adapters"`
	// Auto is the index in Adapters that --device auto would use, or null.
	Auto *int `json:"auto"`
	// Why says why Auto chose that adapter, or why it would use the CPU.
	Why      string    `json:"why"`
	Hint     string    `json:"hint"`
	Findings []finding `json:"findings"`
	// CPUKernel is the fallback's dot-product kernel, for when Auto is null.
	CPUKernel string `json:"cpu_kernel"`
}

func probeReport(rep probe.Report, sel engine.AdapterSelect, sys system) probeJSON {
	power := "high"
	if sel.LowPower {
		power = "low"
	}
	out := probeJSON{
		GPUSupport: engine.GPUSupport(),
		Selection:  selectionJSON{Backend: sel.Backend, Adapter: sel.Name, Power: power},
		Adapters:   []probedAdapterJSON{},
		Why:        oneLine(rep.Reason),
		Hint:       cliHint(rep.Hint),
		Findings:   []finding{},
		CPUKernel:  cpuKernel(),
	}
	for _, r := range rep.Adapters {
		features := r.Features
		if features == nil {
			features = []string{}
		}
		out.Adapters = append(out.Adapters, probedAdapterJSON{
			adapterJSON:  adapterOf(r.Adapter),
			Software:     r.Adapter.Software(),
			Limits:       limitsOf(r.Limits),
			Features:     features,
			Works:        r.Works,
			Error:        oneLine(r.Error),
			AutoEligible: r.Eligible,
			ProbeMS:      math.Round(r.Elapsed.Seconds()*1e4) / 10,
			Variants:     variantsOf(r.Checks),
		})
		if r.Works {
			l := r.Limits
			out.Adapters[len(out.Adapters)-1].Chosen = chosenJSON{Team: l.Team, Subgroups: l.Subgroups, StagedQueries: l.StagedQueries,
				FusedK: l.FusedK, FusedBatchK: l.FusedBatchK, Gemm: l.Gemm, Timestamps: l.Timestamps}
		}
	}
	if rep.Auto >= 0 && rep.Auto < len(rep.Adapters) {
		i := rep.Auto
		out.Auto = &i
		a := rep.Adapters[i].Adapter
		out.Why = fmt.Sprintf("%s (%s, %s) is the first adapter in preference order (%s) that passed its probe and is not a software adapter",
			a.Name, a.API, a.Type, preferenceOrder(sel.LowPower))
		out.Hint = ""
		return out
	}
	out.Findings = diagnose(rep, sel, sys)
	return out
}

func preferenceOrder(lowPower bool) string {
	if lowPower {
		return "integrated, discrete, unknown, software; native APIs before GL"
	}
	return "discrete, integrated, unknown, software; native APIs before GL"
}

// cpuKernel names the fallback's scoring kernel, as an index reports it.
func cpuKernel() string {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 1, Device: engine.CPU})
	if err != nil {
		return ""
	}
	defer ix.Close()
	return ix.Info().CPUKernel
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeProbeText(w io.Writer, r probeJSON) {
	if !r.GPUSupport {
		fmt.Fprintln(w, "This umbra binary has no GPU support (built without cgo or with the nogpu tag).")
	} else if len(r.Adapters) == 0 {
		fmt.Fprintln(w, "No adapters found.")
	} else {
		fmt.Fprintf(w, "Adapters, best first for --power %s:\n", r.Selection.Power)
	}
	for i, a := range r.Adapters {
		kind := a.Type
		if a.Software {
			kind += " (software)"
		}
		fmt.Fprintf(w, "\n[%d] %s\n", i, a.Name)
		field := func(name, value string) { fmt.Fprintf(w, "    %-9s %s\n", name, value) }
		field("type", kind)
		field("backend", a.Backend)
		vendor := a.Vendor
		if vendor == "" {
			vendor = "(not reported)"
		}
		field("vendor", fmt.Sprintf("%s (vendor id 0x%x, device id 0x%x)", vendor, a.VendorID, a.DeviceID))
		field("driver", a.Driver)
		if a.Limits != (limitsJSON{}) {
			field("limits", fmt.Sprintf("storage binding %s, buffer %s, workgroups/dim %d, invocations/workgroup %d",
				bytesText(a.Limits.MaxStorageBindingBytes), bytesText(a.Limits.MaxBufferBytes),
				a.Limits.MaxWorkgroupsPerDim, a.Limits.MaxInvocations))
		}
		if len(a.Features) > 0 {
			field("features", wrap(strings.Join(a.Features, ", "), 84, strings.Repeat(" ", 14)))
		}
		if a.Works {
			field("probe", fmt.Sprintf("works: the search shader ran and gave the right answer (%s ms)", strconv.FormatFloat(a.ProbeMS, 'f', -1, 64)))
		} else {
			field("probe", "FAILED: "+a.Error)
		}
		for _, v := range a.Variants {
			verdict := "passed"
			switch {
			case !v.Passed && v.Error != "":
				verdict = "FAILED: " + v.Error
			case !v.Passed:
				verdict = v.Why
			case v.Chosen:
				verdict = "passed, chosen: " + v.Why
			case v.Why != "":
				verdict = "passed, " + v.Why
			}
			field(v.Kernel, wrap(v.Variant+": "+verdict, 84, strings.Repeat(" ", 14)))
		}
		field("auto", autoVerdict(r, i))
	}
	fmt.Fprintln(w)
	if r.Auto != nil {
		a := r.Adapters[*r.Auto]
		fmt.Fprintf(w, "Auto would use: [%d] %s (%s, %s)\n", *r.Auto, a.Name, a.Backend, a.Type)
		fmt.Fprintf(w, "Why: %s\n", r.Why)
		return
	}
	kernel := ""
	if r.CPUKernel != "" {
		kernel = " (" + r.CPUKernel + ")"
	}
	fmt.Fprintf(w, "Auto would use: no adapter; searches run on the pure-Go CPU path%s\n", kernel)
	fmt.Fprintf(w, "Why: %s\n", r.Why)
	if len(r.Findings) > 0 {
		fmt.Fprintln(w, "\nLikely causes, each with a fix:")
		for _, f := range r.Findings {
			fmt.Fprintf(w, "\n  [%s]\n", f.Cause)
			fmt.Fprintf(w, "    %s\n", wrap(f.Detail, 90, "    "))
			fmt.Fprintf(w, "    fix: %s\n", wrap(f.Hint, 85, "         "))
		}
	} else if r.Hint != "" {
		fmt.Fprintf(w, "Fix: %s\n", r.Hint)
	}
}

func autoVerdict(r probeJSON, i int) string {
	a := r.Adapters[i]
	switch {
	case r.Auto != nil && *r.Auto == i:
		return "chosen"
	case !a.Works:
		return "skipped: probe failed"
	case a.Software:
		return "skipped: software adapter, slower than the CPU path (use it with search --device gpu)"
	case a.AutoEligible:
		return "eligible, but a higher-ranked adapter was chosen"
	}
	return "skipped"
}

// bytesText prints a byte count in binary units, to two decimals at most.
func bytesText(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + " " + units[u]
}

// wrap breaks s at spaces into lines of at most width runes, indenting every
// line after the first with prefix.
func wrap(s string, width int, prefix string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if line+1+len(word) > width {
				b.WriteString("\n" + prefix)
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
