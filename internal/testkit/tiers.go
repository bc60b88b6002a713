package testkit

import (
	"fmt"
	"os"
	"testing"
)

// The tests come in tiers, chosen by two variables:
//
//   - the README's test command (neither set) runs every test, each
//     long matrix or sweep trimmed to a representative part, so the
//     whole module stays within a few minutes on two cores;
//   - UMBRA_FULL=1 (Full; CI sets it) runs them whole;
//   - UMBRA_RACE_DEFERRED=1 (RaceDeferred; CI's race run sets it) skips,
//     under -race only, the single-goroutine matrices that .ci/run's
//     race_deferred list runs whole without -race in the step after, and
//     trims the matrices that start goroutines, or children, to the
//     README's part (Whole), which .ci/run's race_trimmed list runs whole
//     without -race in that step.
const (
	FullEnv         = "UMBRA_FULL"
	RaceDeferredEnv = "UMBRA_RACE_DEFERRED"
)

// Full reports whether UMBRA_FULL=1 asks for the long sweeps and matrices
// the README's test command trims.
func Full() bool { return os.Getenv(FullEnv) == "1" }

// Whole is Full for a matrix whose every part starts the same goroutines
// (or child processes): it runs whole under UMBRA_FULL=1, except in CI's
// race run (a -race build with UMBRA_RACE_DEFERRED=1), where the README's
// part gives the race detector all it can see and the step after runs
// the whole without -race, where it costs a fraction (.ci/run's
// race_trimmed, which TestRaceDeferredListed keeps equal to the tests
// that call this).
func Whole() bool { return Full() && !(Race && os.Getenv(RaceDeferredEnv) == "1") }

// RaceDeferred skips t in CI's race run (a -race build with
// UMBRA_RACE_DEFERRED=1). It is for the long matrices whose code under
// test runs on one goroutine (every path, precision, metric or rounding
// case against a reference): the race detector finds nothing in them the
// concurrent tests would not, and makes them several times slower. CI
// runs each such test whole without -race in the step after the race run
// (.ci/run's race_deferred, which TestRaceDeferredListed keeps equal to
// the tests that call this). Everywhere else, the README's test command
// and a plain go test -race included, they run.
func RaceDeferred(t testing.TB) {
	t.Helper()
	if Race && os.Getenv(RaceDeferredEnv) == "1" {
		t.Skip("CI runs this matrix without -race, in the step after the race run (.ci/run race_deferred)")
	}
}

// RequireGPUEnv set to "1" makes a GPU test that finds no working adapter
// fail instead of skip: CI sets it, where the software adapters must work.
const RequireGPUEnv = "UMBRA_REQUIRE_GPU"

// RequireGPU reports whether UMBRA_REQUIRE_GPU=1 asks for every GPU test
// to run.
func RequireGPU() bool { return os.Getenv(RequireGPUEnv) == "1" }

// NoGPU ends a GPU test that found no working adapter, the message saying
// what was missing: a failure under UMBRA_REQUIRE_GPU=1, a skip elsewhere.
// Every GPU test goes through it, so a CI that lost its adapters fails
// instead of passing on skips.
func NoGPU(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if RequireGPU() {
		t.Fatalf("%s=1 but %s", RequireGPUEnv, msg)
	}
	t.Skip(msg + " (" + RequireGPUEnv + "=1 makes this a failure)")
}
