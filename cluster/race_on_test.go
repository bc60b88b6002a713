//go:build race

package cluster

// raceBuild: the tests run under the race detector, whose shadow memory
// makes a process's RSS several times what it holds: a memory bound is
// checked only without it (.ci/run runs that test apart, without -race).
const raceBuild = true
