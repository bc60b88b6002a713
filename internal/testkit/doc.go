// Package testkit holds what the project's tests share: the random source
// every test draws from, the random vectors it draws, the one near-tie rule
// by which two IDs may trade ranks, the .npy files tests build by hand, and
// the runner for a test binary started again as a child process. Only
// _test.go files import it.
//
// # Replaying a failure
//
// Every test takes its random data from Rand (or Seed, for code that wants a
// number), never from the clock itself. A test binary has one seed: the
// value of UMBRA_SEED when it is set, the clock's otherwise. A test's
// generator is the seed keyed by the test's full name, so it does not depend
// on which other tests run or in what order. The first draw of a test logs
// the seed and the command that replays it:
//
//	seed 1754300000000000000 (replay: UMBRA_SEED=1754300000000000000 go test -run '^TestStressMixedLoad$/^gl$' ./engine)
//
// go test prints a test's log when it fails (or with -v). Running that
// command draws the same data again; UMBRA_SEED with a whole run
// (UMBRA_SEED=N go test ./...) draws every test's data of that run again, in
// every package. Each new go test process draws a new seed unless
// UMBRA_SEED is set; -count repeats a test with the same data.
package testkit
