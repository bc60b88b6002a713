//go:build !unix

package storefile

import (
	"fmt"
	"os"
)

const canMap = false

func mapRows(*os.File, *baseHeader, string) ([]float32, func() error, error) {
	return nil, nil, fmt.Errorf("%w: memory mapping on this platform", ErrUnsupported)
}
