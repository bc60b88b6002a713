package testkit

import "os"

// FullEnv names the variable that asks for the whole of every matrix and
// sweep: CI sets UMBRA_FULL=1; without it a test runs a representative
// part, so the README's test command stays within a few minutes on two
// cores.
const FullEnv = "UMBRA_FULL"

// Full reports whether UMBRA_FULL=1 asks for the long sweeps and matrices
// the README's test command trims.
func Full() bool { return os.Getenv(FullEnv) == "1" }
