//go:build !(js && wasm)

// Package browsertest runs umbra's wasm builds in headless Chromium for
// tests: it finds the browser, builds a GOOS=js GOARCH=wasm program, and
// drives a page with chromedp. Chromium runs WebGPU on its bundled
// software Vulkan (SwiftShader) where the machine has no GPU.
//
// The browser tests cost a minute or more of CPU, so they run only when
// asked: UMBRA_BROWSER=1 runs them where a Chromium is found (skipping
// otherwise), UMBRA_REQUIRE_BROWSER=1 (CI sets it) runs them and fails
// when no Chromium is found. Without either, and under -short unless
// UMBRA_REQUIRE_BROWSER=1, they are skipped with a message saying so.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium returns the browser to run: $UMBRA_CHROMIUM, else the first of
// chromium, chromium-browser, google-chrome-stable and google-chrome on
// PATH; "" when none is found.
func Chromium() string {
	if p := os.Getenv("UMBRA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Require returns the browser's path, or skips the test (not asked for
// with UMBRA_BROWSER=1, -short, or no browser) — or fails it when
// UMBRA_REQUIRE_BROWSER=1 and no browser is found.
func Require(t testing.TB) string {
	t.Helper()
	required := os.Getenv("UMBRA_REQUIRE_BROWSER") == "1"
	if !required && os.Getenv("UMBRA_BROWSER") != "1" {
		t.Skip("a headless-browser test (a minute or more); set UMBRA_BROWSER=1 to run it, UMBRA_REQUIRE_BROWSER=1 to also fail without Chromium")
	}
	if testing.Short() && !required {
		t.Skip("a headless-browser test; skipped under -short")
	}
	p := Chromium()
	if p == "" {
		if required {
			t.Fatal("UMBRA_REQUIRE_BROWSER=1 but no Chromium was found (set UMBRA_CHROMIUM or install chromium)")
		}
		t.Skip("no Chromium found (set UMBRA_CHROMIUM); UMBRA_REQUIRE_BROWSER=1 makes this a failure")
	}
	return p
}

// Flags are the command-line switches the browser runs with: headless,
// WebGPU enabled, SwiftShader allowed where there is no GPU.
var Flags = []chromedp.ExecAllocatorOption{
	chromedp.Flag("headless", "new"),
	chromedp.NoSandbox,
	chromedp.Flag("enable-unsafe-webgpu", true),
	chromedp.Flag("enable-unsafe-swiftshader", true),
	chromedp.Flag("use-angle", "swiftshader"),
	chromedp.Flag("enable-features", "Vulkan"),
	chromedp.NoFirstRun,
	chromedp.NoDefaultBrowserCheck,
	chromedp.WindowSize(1200, 900),
}

// NoWorkgroupInit is Dawn's toggle that skips the zero-initialisation of
// workgroup memory WebGPU otherwise adds to every shader. On SwiftShader
// that prologue makes the pipelines of umbra's batch and fused shaders
// take seconds each to build (all of them together build about 15 times
// faster without it). The toggle only removes the prologue: the WGSL is
// parsed and validated (uniformity included) and computes as before;
// a shader that relied on the zeros could fail without them, none can
// pass because of their absence.
var NoWorkgroupInit = chromedp.Flag("enable-dawn-features", "disable_workgroup_init")

// Browser starts the browser at path, with Flags and extra, and returns a
// context whose chromedp actions run in one tab; cancel closes it.
func Browser(ctx context.Context, path string, logf func(string, ...any), extra ...chromedp.ExecAllocatorOption) (context.Context, context.CancelFunc) {
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(path)}, Flags...)
	opts = append(opts, extra...)
	// UMBRA_CHROMIUM_FLAGS adds switches (name=value, space-separated),
	// e.g. Dawn toggles, for experiments.
	for _, f := range strings.Fields(os.Getenv("UMBRA_CHROMIUM_FLAGS")) {
		name, value, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if ok {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(logf), chromedp.WithListener(func(ev any) {
		switch e := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				if a.Value != nil {
					parts = append(parts, strings.Trim(string(a.Value), `"`))
				} else {
					parts = append(parts, a.Description)
				}
			}
			logf("console.%s: %s", e.Type, strings.Join(parts, " "))
		case *cdpruntime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			logf("page exception: %s", msg)
		}
	}))
	return bctx, func() { cancelTab(); cancelAlloc() }
}

// WasmExec returns the path of the Go distribution's wasm_exec.js, the
// loader a page needs to run a GOOS=js program.
func WasmExec() (string, error) {
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		full := filepath.Join(runtime.GOROOT(), p)
		if _, err := os.Stat(full); err == nil {
			return full, nil
		}
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", err
	}
	full := filepath.Join(string(out[:len(out)-1]), "lib/wasm/wasm_exec.js")
	_, err = os.Stat(full)
	return full, err
}

// BuildWasm builds package pkg (an import path) for GOOS=js GOARCH=wasm
// into dir/main.wasm and copies wasm_exec.js beside it.
func BuildWasm(pkg, dir string) error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "main.wasm"), pkg)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return &BuildError{Pkg: pkg, Out: string(out), Err: err}
	}
	src, err := WasmExec()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "wasm_exec.js"), b, 0o644)
}

// BuildError is a failed wasm build with the compiler's output.
type BuildError struct {
	Pkg, Out string
	Err      error
}

func (e *BuildError) Error() string {
	return "building " + e.Pkg + " for js/wasm: " + e.Err.Error() + "\n" + e.Out
}
