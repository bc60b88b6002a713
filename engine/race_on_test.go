//go:build race

package engine_test

// raceBuild: the tests run under the race detector, which makes the
// sweeps that open a fresh index per failed step about ten times slower.
const raceBuild = true
