//go:build !unix

package storefile

// syncDir is a no-op where directories cannot be opened for fsync (Windows,
// whose NTFS journals the rename itself; plan9; wasm). On those systems a
// power loss right after a rename may still roll the rename back, which
// leaves the previous, complete file: never a torn one.
func syncDir(string) error { return nil }
