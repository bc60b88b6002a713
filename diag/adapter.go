package diag

// AdapterInfo describes one wgpu adapter, as the probe (engine.Probe) and
// engine.Info report it.
type AdapterInfo struct {
	Name     string // device name, e.g. "NVIDIA GeForce RTX 3050 Laptop GPU"
	Vendor   string // vendor as the driver reports it
	VendorID uint32
	DeviceID uint32
	API      string // "vulkan", "metal", "dx12", "gl"
	Type     string // "discrete", "integrated", "cpu" or "unknown"
	Driver   string // driver description
}

// String names the adapter with its API and type, e.g.
// "NVIDIA GeForce RTX 3050 Laptop GPU (vulkan, discrete)".
func (a AdapterInfo) String() string { return a.Name + " (" + a.API + ", " + a.Type + ")" }

// Software reports whether the adapter runs on the CPU (lavapipe, llvmpipe,
// WARP, SwiftShader).
func (a AdapterInfo) Software() bool { return a.Type == "cpu" }
