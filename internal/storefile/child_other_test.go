//go:build !unix

package storefile

func runChild(string) int { return 2 }
