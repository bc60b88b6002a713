//go:build cgo && !nogpu

package engine

// SetGPUFault makes every wgpu call of ix's device side that can fail ask f
// first, by the name of its step; a non-nil error from f fails that call as
// if the device had. nil removes the hook. Tests use it to reach every
// failure path.
func SetGPUFault(ix *Index, f func(step string) error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	g := ix.gpu.(*wgpuIndex)
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	g.fault = f
}
