//go:build !unix

package storefile

import (
	"fmt"
	"os"
)

const canMap = false

func mapRows(*os.File, *baseHeader, string) ([]float32, uintptr, uintptr, func() error, error) {
	return nil, 0, 0, nil, fmt.Errorf("%w: memory mapping on this platform", ErrUnsupported)
}

// changeStamp is a zero stamp where nothing is mapped.
func changeStamp(*os.File) ([3]int64, error) { return [3]int64{}, nil }
