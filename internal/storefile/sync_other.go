//go:build !unix

package storefile

// syncDir is a no-op where directories cannot be opened for fsync: on
// Windows, Go opens a directory read-only and FlushFileBuffers needs a
// handle with write access, and NTFS journals the rename itself; plan9 and
// wasm have nothing to flush. On those systems a power loss right after a
// rename may still roll the rename back, which leaves the previous,
// complete file: never a torn one.
func syncDir(string) error { return nil }
