package engine

import "errors"

// Sentinel errors. Every error the engine returns wraps one of these (check
// with errors.Is) and says in its message which input or which device step
// was at fault.
var (
	ErrInvalidConfig = errors.New("umbra: invalid config")
	ErrDimMismatch   = errors.New("umbra: dimension mismatch")
	ErrNonFinite     = errors.New("umbra: value is NaN or infinite")
	ErrZeroVector    = errors.New("umbra: zero vector under cosine")
	ErrInvalidK      = errors.New("umbra: k must be at least 1")
	ErrTooLarge      = errors.New("umbra: too many vectors")
	ErrClosed        = errors.New("umbra: index is closed")
	ErrNoAdapter     = errors.New("umbra: no usable GPU adapter")
	ErrNoGPUSupport  = errors.New("umbra: built without GPU support")
	ErrGPU           = errors.New("umbra: GPU failure")
)
