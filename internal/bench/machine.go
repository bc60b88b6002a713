package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"github.com/umbravec/umbra/internal/version"
)

// Version is the umbra version a report names: the same as umbra version's.
var Version = version.String()

// CPUInfo describes the host processor a run measured.
type CPUInfo struct {
	Model      string `json:"model"`
	Cores      int    `json:"cores"`      // logical CPUs the OS reports
	GOMAXPROCS int    `json:"gomaxprocs"` // goroutines running Go code at once; the fallback's default workers
	// FallbackKernel is the dot-product kernel the pure-Go path chose
	// ("avx512", "avx2+fma", "generic").
	FallbackKernel string `json:"fallback_kernel"`
}

// hostCPU returns the CPU model (from /proc/cpuinfo where there is one)
// and the core counts.
func hostCPU() CPUInfo {
	return CPUInfo{Model: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")"
	}
	defer f.Close()
	// x86 names the model in "model name"; arm64 kernels may offer only
	// "Hardware", "Model" or "CPU part".
	var alt string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name":
			if val != "" {
				return val
			}
		case "Hardware", "Model":
			if alt == "" {
				alt = val
			}
		}
	}
	if alt != "" {
		return alt
	}
	return "unknown (" + runtime.GOARCH + ")"
}
