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
