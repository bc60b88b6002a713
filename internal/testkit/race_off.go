//go:build !race

package testkit

// Race reports whether the test binary was built with the race detector.
const Race = false
