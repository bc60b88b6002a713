package main

import (
	"fmt"
	"runtime"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/version"
)

func (*versionCmd) Help() string {
	return `Print umbra's module version (` + version.Fallback + ` for a build from a
checkout without one; VCS revision when the build recorded one),
the Go toolchain and platform it was built with, whether the wgpu GPU backend
is compiled in (it needs cgo; the nogpu build tag leaves it out) and the CPU
path's scoring kernel.`
}

func (*versionCmd) Examples() []string { return []string{"umbra version"} }

type versionCmd struct {
	JSON bool     `name:"json" help:"print the same as JSON, an object of version, revision, modified, go, os, arch, gpu_support and cpu_kernel"`
	Args []string `arg:"" optional:"" hidden:""`
}

func (c *versionCmd) Validate() error { return noArguments(c.Args) }

func (c *versionCmd) Run(e *env) error {
	v := buildVersion()
	if c.JSON {
		return writeJSON(e.stdout, v)
	}
	fmt.Fprintf(e.stdout, "umbra %s\n", v.Version)
	if v.Revision != "" {
		mod := ""
		if v.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(e.stdout, "  revision    %s%s\n", v.Revision, mod)
	}
	fmt.Fprintf(e.stdout, "  go          %s %s/%s\n", v.Go, v.OS, v.Arch)
	if v.GPUSupport {
		fmt.Fprintln(e.stdout, "  gpu         yes (wgpu backend built in; 'umbra probe' tests the adapters)")
	} else {
		fmt.Fprintln(e.stdout, "  gpu         no (built without cgo or with the nogpu tag): searches run on the CPU")
	}
	fmt.Fprintf(e.stdout, "  cpu kernel  %s\n", v.CPUKernel)
	return nil
}

type versionJSON struct {
	Version    string `json:"version"`
	Revision   string `json:"revision"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	GPUSupport bool   `json:"gpu_support"`
	CPUKernel  string `json:"cpu_kernel"`
}

func buildVersion() versionJSON {
	b := version.Get()
	return versionJSON{Version: b.Version, Revision: b.Revision, Modified: b.Modified,
		Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		GPUSupport: engine.GPUSupport(), CPUKernel: cpuKernel()}
}
