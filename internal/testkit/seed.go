package testkit

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SeedEnv is the variable that fixes the seed of every test (see the
// package doc).
const SeedEnv = "UMBRA_SEED"

// module is this module's path, cut from a test's package path to name the
// package in a replay command.
const module = "github.com/umbravec/umbra"

var (
	binarySeed struct {
		once sync.Once
		seed uint64
		err  error
	}
	drawsMu sync.Mutex
	draws   = map[string]uint64{} // per running test: the generators it drew
)

// processSeed is this test binary's seed: UMBRA_SEED, or the clock's.
func processSeed() (uint64, error) {
	s := &binarySeed
	s.once.Do(func() {
		if v := os.Getenv(SeedEnv); v != "" {
			s.seed, s.err = strconv.ParseUint(v, 10, 64)
			return
		}
		s.seed = uint64(time.Now().UnixNano())
	})
	return s.seed, s.err
}

// Rand returns a generator for t's random data: the binary's seed keyed by
// t's name and by how many generators t drew before this one, so that a
// replay draws the same data (see the package doc). The first call of a
// test logs the seed and the command that replays it.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	seed, err := processSeed()
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer: %v", SeedEnv, os.Getenv(SeedEnv), err)
	}
	name := t.Name()
	drawsMu.Lock()
	n := draws[name]
	draws[name]++
	drawsMu.Unlock()
	if n == 0 {
		// A test run again (-count) draws its data anew from the start.
		t.Cleanup(func() {
			drawsMu.Lock()
			delete(draws, name)
			drawsMu.Unlock()
		})
		t.Logf("seed %d (replay: %s=%d go test -run '%s' %s)", seed, SeedEnv, seed, runPattern(name), callerPackage())
	}
	return stream(seed, name, n)
}

// stream is the generator of the n-th draw of the test named name.
func stream(seed uint64, name string, n uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write(binary.LittleEndian.AppendUint64(nil, n))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Seed is a seed drawn from t's generator, for code under test that takes a
// seed rather than a generator (a data set's maker, a child process).
func Seed(t testing.TB) uint64 {
	t.Helper()
	return Rand(t).Uint64()
}

// runPattern is the -run pattern that selects exactly the test named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// callerPackage is the package of the nearest caller in a _test.go file,
// as a go test argument ("./engine"), or "." when it cannot tell.
func callerPackage() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.File, "_test.go") {
			fn := f.Function // e.g. github.com/umbravec/umbra/engine_test.TestX.func1
			slash := strings.LastIndex(fn, "/")
			dot := strings.Index(fn[slash+1:], ".")
			if dot < 0 {
				return "."
			}
			pkg := strings.TrimSuffix(fn[:slash+1+dot], "_test")
			if rel, ok := strings.CutPrefix(pkg, module+"/"); ok {
				return "./" + rel
			}
			return "."
		}
		if !more {
			return "."
		}
	}
}
