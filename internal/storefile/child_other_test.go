//go:build !unix

package storefile

// childRoles: the tests that start a child process are Unix's.
var childRoles = map[string]func() int{}
