package testkit

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Main(m, map[string]func() int{
		"echo": func() int {
			fmt.Print(os.Getenv("TESTKIT_SAY"))
			fmt.Fprint(os.Stderr, "to stderr")
			_, has := os.LookupEnv("TESTKIT_GONE")
			if has {
				return 4
			}
			return 3
		},
	})
}

// A test's generator depends only on the binary's seed, the test's name
// and how many it drew before, so a replay draws the same data; the second
// draw of a test differs from the first, and another test's from both.
func TestRandReplays(t *testing.T) {
	seed, err := processSeed()
	if err != nil {
		t.Fatal(err)
	}
	var first uint64
	t.Run("one", func(t *testing.T) {
		a, b := Rand(t).Uint64(), Rand(t).Uint64()
		if a == b {
			t.Fatalf("two draws of one test gave the same stream: %d", a)
		}
		if a != stream(seed, t.Name(), 0).Uint64() || b != stream(seed, t.Name(), 1).Uint64() {
			t.Fatal("the draws are not the test's streams")
		}
		first = a
	})
	t.Run("other", func(t *testing.T) {
		if Rand(t).Uint64() == first {
			t.Fatal("another test drew the same stream")
		}
	})
}

func TestRunPattern(t *testing.T) {
	for name, want := range map[string]string{
		"TestX":             "^TestX$",
		"TestX/gl/f32":      "^TestX$/^gl$/^f32$",
		"TestX/k=1_(batch)": `^TestX$/^k=1_\(batch\)$`,
	} {
		if got := runPattern(name); got != want {
			t.Errorf("runPattern(%q) = %q, want %q", name, got, want)
		}
	}
	if got := callerPackage(); got != "./internal/testkit" {
		t.Errorf("callerPackage() = %q from testkit's own test, want ./internal/testkit", got)
	}
}

func TestMatrix(t *testing.T) {
	r := Rand(t)
	m := Matrix(r, 500, 3)
	if len(m) != 1500 {
		t.Fatalf("%d values, want 1500", len(m))
	}
	for _, v := range m {
		if v < -1 || v >= 1 {
			t.Fatalf("value %v outside [-1, 1)", v)
		}
	}
	vs := Vectors(r, 3, 2)
	vs[0] = append(vs[0], 9)
	if vs[1][0] == 9 {
		t.Fatal("an append to one vector wrote into the next")
	}
}

func TestSameRanking(t *testing.T) {
	// IDs 0..4 score 5, 4, 3.999995 (a near-tie with ID 1), 2, 1.
	scores := []float64{5, 4, 3.999995, 2, 1}
	ref := func(id uint64) (Ref, error) {
		if id >= uint64(len(scores)) {
			return Ref{}, fmt.Errorf("no row %d", id)
		}
		return Ref{ID: id, Score: scores[id], Tol: Tolerance(scores[id], 0)}, nil
	}
	hits := func(ids ...uint64) []Hit {
		var out []Hit
		for _, id := range ids {
			out = append(out, Hit{id, float32(scores[id])})
		}
		return out
	}
	for _, c := range []struct {
		name      string
		want, got []Hit
		ok        bool
	}{
		{"same", hits(0, 1, 2), hits(0, 1, 2), true},
		{"near-tie swapped", hits(0, 1, 2), hits(0, 2, 1), true},
		{"near-tie across the cut", hits(0, 1), hits(0, 2), true},
		{"wrong last rank", hits(0, 1, 2), hits(0, 1, 3), false},
		{"wrong first rank", hits(0, 1), hits(1, 0), false},
		{"repeated ID", hits(0, 1, 2), hits(0, 1, 1), false},
		{"short", hits(0, 1, 2), hits(0, 1), false},
		{"unknown ID", hits(0), []Hit{{ID: 9, Score: 5}}, false},
		{"reported score off", hits(0, 1), []Hit{{0, 5}, {1, 4.01}}, false},
		// The reported scores would make 3 look tied with 1: the rule
		// reads the data, not the report.
		{"tie only in the report", hits(0, 1), []Hit{{0, 5}, {3, 4}}, false},
	} {
		err := SameRanking(c.want, c.got, ref)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestTolerance(t *testing.T) {
	if got := Tolerance(0.5, 0); got != 1e-5 {
		t.Errorf("Tolerance(0.5, 0) = %g, want 1e-5", got)
	}
	if got := Tolerance(-300, 0); math.Abs(got-3e-3) > 1e-12 {
		t.Errorf("Tolerance(-300, 0) = %g, want 3e-3", got)
	}
	if got := Tolerance(0.01, 1e3); got != 1e-3 {
		t.Errorf("Tolerance(0.01, 1e3) = %g, want 1e-3: cancellation", got)
	}
}

func TestNPY(t *testing.T) {
	b := NPY("<f4", "(2, 3)", make([]byte, 24))
	if !strings.HasPrefix(string(b), "\x93NUMPY\x01\x00") {
		t.Fatalf("magic: %q", b[:8])
	}
	hlen := int(binary.LittleEndian.Uint16(b[8:]))
	if (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' || len(b) != 10+hlen+24 {
		t.Fatalf("header of %d bytes, file of %d: %q", hlen, len(b), b)
	}
	if !strings.Contains(string(b), "'descr': '<f4'") || !strings.Contains(string(b), "'shape': (2, 3)") {
		t.Fatalf("header %q", b[10:10+hlen])
	}
}

func TestChild(t *testing.T) {
	t.Setenv("TESTKIT_GONE", "1")
	out := Run(t, Child("echo", "TESTKIT_SAY=hello", "TESTKIT_GONE="))
	if out != (Output{Stdout: "hello", Stderr: "to stderr", Code: 3}) {
		t.Fatalf("child: %+v", out)
	}
	out = Run(t, Child("no such role"))
	if out.Code != 2 || !strings.Contains(out.Stderr, `no child role "no such role"`) {
		t.Fatalf("unknown role: %+v", out)
	}
}

func TestScore(t *testing.T) {
	v, q := []float32{3, 4}, []float32{4, -3}
	for _, c := range []struct {
		m          Metric
		score, tol float64
	}{
		{Cosine, 0, 1e-5},
		{Dot, 0, 2.4e-5}, // 12 - 12: the terms' 24 sets the bound
		{L2, 50, 5e-4},
	} {
		got := Score(c.m, 7, v, q)
		if got.ID != 7 || math.Abs(got.Score-c.score) > 1e-12 || math.Abs(got.Tol-c.tol) > 1e-12 {
			t.Errorf("metric %d: %+v, want score %g tolerance %g", c.m, got, c.score, c.tol)
		}
	}
}
