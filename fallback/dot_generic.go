//go:build !amd64 || purego

package fallback

// Without assembly the portable kernels are the only choice; the variable
// defaults in kernels.go already name them.
