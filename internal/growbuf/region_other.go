//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64))

package growbuf

import "errors"

// Elsewhere every buffer is Go heap memory.
const haveRegions = false

func strictOvercommit() bool { return false }

func mapRegion(int) ([]byte, error) { return nil, errors.New("no regions on this platform") }

func unmapRegion([]byte) error { return nil }

func populate([]byte) {}
