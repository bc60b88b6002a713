package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

// finding is one likely reason --device auto would not use a GPU, with the
// fix for it.
type finding struct {
	Cause  string `json:"cause"` // a stable token; README.md lists them
	Detail string `json:"detail"`
	Hint   string `json:"hint"`
}

// Cause tokens. Those the engine also finds are its hint codes.
const (
	causeNoGPUSupport   = umbra.HintNoGPUSupport
	causeNoMatch        = umbra.HintNoMatch
	causeNoLoader       = "no-vulkan-loader"
	causeNoDriver       = "no-vulkan-driver"
	causeNoDevice       = "no-gpu-device"
	causeDevicePerm     = "gpu-device-permission"
	causeSoftwareOnly   = umbra.HintSoftwareOnly
	causeProbeFailed    = umbra.HintProbeFailed
	causeLimitsTooSmall = "limits-too-small"
	causeNoAdapter      = umbra.HintNoAdapter
)

// system is what diagnose inspects besides the probe report: files and
// environment of the machine. Tests substitute a fake.
type system interface {
	goos() string
	getenv(key string) string
	// glob returns the paths matching pattern (filepath.Glob syntax).
	glob(pattern string) []string
	// openable reports whether this process may open path for reading and
	// writing, as a driver opening a device node does.
	openable(path string) bool
}

type runningSystem struct{}

func (runningSystem) goos() string             { return runtime.GOOS }
func (runningSystem) getenv(key string) string { return os.Getenv(key) }
func (runningSystem) glob(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}
func (runningSystem) openable(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// WebGPU's default limits: every conforming adapter supports at least these,
// and the engine's chunk plan assumes them.
const (
	minStorageBinding = 128 << 20
	minBuffer         = 256 << 20
	minWorkgroups     = 65535
	minInvocations    = 256
)

// diagnose explains, cause by cause, why Auto chose no adapter in rep. It
// combines the report with what the machine shows (loader, driver
// manifests, device nodes), since an adapter that never appeared left no
// error to report.
func diagnose(rep probe.Report, sel engine.AdapterSelect, sys system) []finding {
	return diagnoseBuild(rep, sel, sys, engine.GPUSupport())
}

func diagnoseBuild(rep probe.Report, sel engine.AdapterSelect, sys system, gpu bool) []finding {
	if !gpu {
		return []finding{{causeNoGPUSupport, rep.Reason,
			"rebuild with cgo enabled (CGO_ENABLED=1 and a C compiler) and without the nogpu tag"}}
	}
	var out []finding
	add := func(cause, detail, hint string) { out = append(out, finding{cause, detail, hint}) }

	hardware, vulkan := false, false
	for _, r := range rep.Adapters {
		hardware = hardware || !r.Adapter.Software()
		vulkan = vulkan || r.Adapter.API == "vulkan"
	}
	if len(rep.Adapters) == 0 && (sel.Backend != "" || sel.Name != "") {
		add(causeNoMatch, rep.Reason,
			"drop --backend and --adapter (or loosen them); 'umbra probe' with neither lists every adapter")
	}
	if sys.goos() == "linux" && !hardware {
		wantVulkan := sel.Backend == "" || sel.Backend == "vulkan"
		if wantVulkan && !vulkan {
			if lib := findVulkanLoader(sys); lib == "" {
				add(causeNoLoader, "libvulkan.so.1 (the Vulkan loader) is in none of the library directories, so no Vulkan adapter can appear",
					"install the loader: apt-get install libvulkan1 (Fedora: dnf install vulkan-loader; Arch: pacman -S vulkan-icd-loader)")
			}
		}
		if wantVulkan {
			if f, ok := driverFinding(sys); ok {
				out = append(out, f)
			}
		}
		if f, ok := deviceNodeFinding(sys); ok {
			out = append(out, f)
		}
	}

	var soft, failed, small []string
	for _, r := range rep.Adapters {
		name := fmt.Sprintf("%s (%s, %s)", r.Adapter.Name, r.Adapter.API, r.Adapter.Type)
		switch {
		case !r.Works:
			failed = append(failed, name+": "+oneLine(r.Error))
		case r.Adapter.Software():
			soft = append(soft, name)
		}
		if s := smallLimits(r.Limits); s != "" {
			small = append(small, name+": "+s)
		}
	}
	if len(soft) > 0 {
		add(causeSoftwareOnly, "only software adapters work, and they run on the CPU more slowly than umbra's own CPU path: "+strings.Join(soft, "; "),
			"install your GPU's driver so that a hardware adapter appears; to use a software adapter anyway: umbra search --device gpu")
	}
	if len(failed) > 0 {
		add(causeProbeFailed, "the probe failed on "+strings.Join(failed, "; "),
			"update the GPU driver, or choose another adapter with --adapter NAME or --backend B")
	}
	if len(small) > 0 {
		add(causeLimitsTooSmall, "limits below WebGPU's defaults: "+strings.Join(small, "; "),
			"this adapter or driver is too limited for umbra's shader: update the driver or choose another adapter with --adapter or --backend")
	}
	if len(out) == 0 {
		add(causeNoAdapter, oneLine(rep.Reason), cliHint(rep.Hint))
	}
	return out
}

func smallLimits(l gpu.Limits) string {
	if l == (gpu.Limits{}) {
		return "" // never read: the probe failed before
	}
	var s []string
	if l.MaxStorageBindingBytes < minStorageBinding {
		s = append(s, fmt.Sprintf("max storage binding %s < %s", bytesText(l.MaxStorageBindingBytes), bytesText(minStorageBinding)))
	}
	if l.MaxBufferBytes < minBuffer {
		s = append(s, fmt.Sprintf("max buffer %s < %s", bytesText(l.MaxBufferBytes), bytesText(minBuffer)))
	}
	if l.MaxWorkgroupsPerDim < minWorkgroups {
		s = append(s, fmt.Sprintf("max workgroups per dimension %d < %d", l.MaxWorkgroupsPerDim, minWorkgroups))
	}
	if l.MaxInvocations < minInvocations {
		s = append(s, fmt.Sprintf("max invocations per workgroup %d < %d", l.MaxInvocations, minInvocations))
	}
	return strings.Join(s, ", ")
}

// findVulkanLoader returns the path of libvulkan.so.1 in the directories
// the dynamic linker searches, or "".
func findVulkanLoader(sys system) string {
	dirs := filepath.SplitList(sys.getenv("LD_LIBRARY_PATH"))
	dirs = append(dirs, "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib",
		"/lib/*-linux-gnu*", "/usr/lib/*-linux-gnu*")
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if m := sys.glob(filepath.Join(d, "libvulkan.so.1")); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// icdDirs are where the Vulkan loader looks for driver manifests on Linux.
func icdDirs(sys system) []string {
	orDefault := func(key, def string) string {
		if v := sys.getenv(key); v != "" {
			return v
		}
		return def
	}
	var dirs []string
	for _, d := range filepath.SplitList(orDefault("XDG_CONFIG_DIRS", "/etc/xdg")) {
		dirs = append(dirs, filepath.Join(d, "vulkan/icd.d"))
	}
	dirs = append(dirs, "/etc/vulkan/icd.d")
	if dh := sys.getenv("XDG_DATA_HOME"); dh != "" {
		dirs = append(dirs, filepath.Join(dh, "vulkan/icd.d"))
	} else if home := sys.getenv("HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, ".local/share/vulkan/icd.d"))
	}
	for _, d := range filepath.SplitList(orDefault("XDG_DATA_DIRS", "/usr/local/share:/usr/share")) {
		dirs = append(dirs, filepath.Join(d, "vulkan/icd.d"))
	}
	return dirs
}

const driverHint = "install your GPU's Vulkan driver: NVIDIA: the proprietary driver (it ships nvidia_icd.json); " +
	"AMD or Intel: apt-get install mesa-vulkan-drivers (Fedora: mesa-vulkan-drivers; Arch: vulkan-radeon or vulkan-intel)"

// driverFinding reports a missing or software-only set of Vulkan driver
// manifests (ICDs).
func driverFinding(sys system) (finding, bool) {
	for _, key := range []string{"VK_DRIVER_FILES", "VK_ICD_FILENAMES"} {
		if v := sys.getenv(key); v != "" {
			// The override replaces the search: name it, it is the likely culprit.
			return finding{causeNoDriver, fmt.Sprintf("%s=%s replaces the Vulkan loader's driver search", key, v),
				"unset " + key + " or point it at your GPU's ICD .json; " + driverHint}, true
		}
	}
	dirs := icdDirs(sys)
	var icds []string
	for _, d := range dirs {
		for _, m := range sys.glob(filepath.Join(d, "*.json")) {
			icds = append(icds, filepath.Base(m))
		}
	}
	slices.Sort(icds)
	icds = slices.Compact(icds)
	if len(icds) == 0 {
		return finding{causeNoDriver, "no Vulkan driver manifest (ICD .json) in " + strings.Join(dirs, ", "), driverHint}, true
	}
	for _, name := range icds {
		if !softwareICD(name) {
			return finding{}, false
		}
	}
	return finding{causeNoDriver, "only software Vulkan drivers are installed: " + strings.Join(icds, ", "), driverHint}, true
}

func softwareICD(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "lvp") || strings.Contains(n, "swiftshader") || strings.Contains(n, "llvmpipe")
}

// deviceNodeFinding reports when the kernel shows no GPU device node, or
// none this user may open.
func deviceNodeFinding(sys system) (finding, bool) {
	nodes := append(sys.glob("/dev/dri/renderD*"), sys.glob("/dev/nvidia[0-9]*")...)
	if len(nodes) == 0 {
		return finding{causeNoDevice,
			"the kernel shows no GPU device node (no /dev/dri/renderD* or /dev/nvidia0): there is no GPU, its kernel driver is not loaded, or this is a container the GPU was not passed into",
			"check that the GPU and its kernel driver are there (lspci -k | grep -A3 -E 'VGA|3D'; nvidia-smi); in Docker pass it in with --gpus all (NVIDIA Container Toolkit) or --device /dev/dri"}, true
	}
	for _, n := range nodes {
		if sys.openable(n) {
			return finding{}, false
		}
	}
	return finding{causeDevicePerm, "this user cannot open the GPU device nodes " + strings.Join(nodes, ", "),
		"add the user to the groups that own them (sudo usermod -aG render,video $USER) and log in again"}, true
}
