package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// The tests drive the built binary, as a user would: TestMain builds it
// once into a temporary directory.
var (
	binDir   string
	umbraBin string

	nogpuOnce sync.Once
	nogpuBin  string
	nogpuErr  error

	// childEnv is the environment of every run. Mesa's EGL prints
	// "XDG_RUNTIME_DIR is invalid" on stderr when the variable is unset,
	// which would be noise around the one-line errors under test.
	childEnv []string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	binDir, err = os.MkdirTemp("", "umbra-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	childEnv = os.Environ()
	if os.Getenv("XDG_RUNTIME_DIR") == "" {
		rt := filepath.Join(binDir, "runtime")
		if err := os.Mkdir(rt, 0o700); err == nil {
			childEnv = append(childEnv, "XDG_RUNTIME_DIR="+rt)
		}
	}
	umbraBin = filepath.Join(binDir, "umbra"+exeSuffix())
	if out, err := goBuild(umbraBin, nil); err != nil {
		fmt.Fprintf(os.Stderr, "building umbra: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// goBuild builds this package into out with extra environment.
func goBuild(out string, extraEnv []string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), extraEnv...)
	return cmd.CombinedOutput()
}

// nogpuBinary builds umbra without cgo (so without the wgpu backend) once.
func nogpuBinary(t *testing.T) string {
	t.Helper()
	nogpuOnce.Do(func() {
		nogpuBin = filepath.Join(binDir, "umbra-nogpu"+exeSuffix())
		var out []byte
		out, nogpuErr = goBuild(nogpuBin, []string{"CGO_ENABLED=0"})
		if nogpuErr != nil {
			nogpuErr = fmt.Errorf("%v\n%s", nogpuErr, out)
		}
	})
	require.NoError(t, nogpuErr, "building umbra with CGO_ENABLED=0")
	return nogpuBin
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, tail(r.stdout), tail(r.stderr))
}

// tail keeps failure messages readable when a crash dumps every goroutine.
func tail(s string) string {
	const max = 4000
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("[%d bytes cut]...%s", len(s)-max, s[len(s)-max:])
}

func runUmbra(t *testing.T, args ...string) result {
	t.Helper()
	return runBinary(t, umbraBin, args...)
}

func runBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv
	out := testkit.Run(t, cmd)
	return result{stdout: out.Stdout, stderr: out.Stderr, code: out.Code}
}

// startUmbra starts umbra with args and returns what waits for its result,
// for a test that runs another command meanwhile. The wait must be called
// from the test's goroutine.
func startUmbra(t *testing.T, args ...string) (wait func() result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, umbraBin, args...)
	cmd.Env = childEnv
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting umbra %s: %v", strings.Join(args, " "), err)
	}
	return func() result {
		t.Helper()
		defer cancel()
		err := cmd.Wait()
		r := result{stdout: stdout.String(), stderr: stderr.String()}
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			r.code = exit.ExitCode()
		default:
			t.Fatalf("running umbra %s: %v", strings.Join(args, " "), err)
		}
		return r
	}
}

// requireErrorLine checks that a failed run explained itself in exactly one
// line on stderr starting with "umbra: ", and returns that line. Lines a
// graphics driver prints on its own are not ours to judge.
func requireErrorLine(t *testing.T, r result) string {
	t.Helper()
	var ours []string
	for _, l := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		if strings.HasPrefix(l, "umbra") {
			ours = append(ours, l)
		}
	}
	require.Len(t, ours, 1, "want one error line on stderr\n%s", r)
	require.True(t, strings.HasPrefix(ours[0], "umbra: "), "error line %q", ours[0])
	require.True(t, strings.HasSuffix(r.stderr, ours[0]+"\n"), "the error line comes last\n%s", r)
	return ours[0]
}

// randomMatrix is testkit's random matrix as the host.Matrix the CLI's
// files hold.
func randomMatrix(rng *rand.Rand, rows, dim int) *host.Matrix {
	return &host.Matrix{Rows: rows, Dim: dim, Data: testkit.Matrix(rng, rows, dim)}
}

// writeMatrix writes m to dir/name (format by extension, dtype "<f4" or
// "<f2" for .npy) and returns the path.
func writeMatrix(t *testing.T, dir, name string, m *host.Matrix, dtype string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, host.WriteMatrixFile(p, m, dtype))
	return p
}

func float32Bytes(xs []float32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := testkit.Rand(t)
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 10, 4), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, 4), "")
	base := []string{"search", "--data", data, "--queries", queries}
	tests := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"no command", nil, ""},
		{"unknown command", []string{"frob"}, `unknown command "frob"`},
		{"flag before command", []string{"--bogus"}, "flags go after the command"},
		{"unknown flag", []string{"search", "--bogus"}, "unknown flag --bogus"},
		{"missing --data", []string{"search", "--queries", queries, "--k", "3"}, "missing required flag --data"},
		{"missing --queries", []string{"search", "--data", data, "--k", "3"}, "missing the queries: give --queries FILE, --near KEY or --vector V"},
		{"missing --k", base, "missing required flag --k"},
		{"k zero", append(base, "--k", "0"), "--k must be at least 1"},
		{"k negative", append(base, "--k=-2"), "--k must be at least 1"},
		{"k negative, spaced", append(base, "--k", "-2"), "--k must be at least 1, got -2"},
		{"misspelt flag", append(base, "--k", "3", "--metrc", "l2"), `unknown flag --metrc, did you mean "--metric"?`},
		{"value missing before the next flag", []string{"search", "--data", "--queries", queries, "--k", "3"}, "--data: needs a value, got the flag --queries"},
		{"k not a number", append(base, "--k", "ten"), `--k: invalid value "ten"`},
		{"k without value", append(base, "--k"), "--k: needs a value"},
		{"bad metric", append(base, "--k", "3", "--metric", "hamming"), "want cosine, dot or l2"},
		{"bad device", append(base, "--k", "3", "--device", "tpu"), "want auto, gpu or cpu"},
		{"bad backend", append(base, "--k", "3", "--backend", "cuda"), "want vulkan, metal, dx12 or gl"},
		{"bad power", append(base, "--k", "3", "--power", "max"), "want high or low"},
		{"search extra argument", append(base, "--k", "3", "extra"), `unexpected argument "extra"`},
		{"search positional", []string{"search", data, queries, "5"}, "umbra search --data " + data + " --queries " + queries + " --k 5"},
		{"convert one argument", []string{"convert", data}, "want IN and OUT, got 1 argument ("},
		{"convert no argument", []string{"convert"}, "want IN and OUT, got 0 arguments"},
		{"convert three arguments", []string{"convert", data, "a.npy", "b.npy"}, "want IN and OUT, got 3"},
		{"convert unknown extension", []string{"convert", data, filepath.Join(dir, "out.csv")}, "want a .npy or .fvecs extension"},
		{"convert f16 to fvecs", []string{"convert", data, filepath.Join(dir, "out.fvecs"), "--dtype", "f16"}, ".fvecs holds float32 only"},
		{"convert bad dtype", []string{"convert", "--dtype", "f64", data, filepath.Join(dir, "out.npy")}, "want f32 or f16"},
		{"probe argument", []string{"probe", "all"}, `unexpected argument "all"`},
		{"probe bad backend", []string{"probe", "--backend", "cuda"}, "want vulkan, metal, dx12 or gl"},
		{"version argument", []string{"version", "now"}, `unexpected argument "now"`},
		{"help unknown command", []string{"help", "frob"}, `unknown command "frob"`},
		{"help two commands", []string{"help", "probe", "search"}, "at most one command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, tc.args...)
			require.Equal(t, exitUsage, r.code, "%s", r)
			assert.Empty(t, r.stdout)
			if tc.args == nil {
				assert.Contains(t, r.stderr, "Usage:", "no command prints the usage")
				return
			}
			line := requireErrorLine(t, r)
			assert.Contains(t, line, tc.want)
		})
	}
	// Nothing was written by the refused conversions.
	for _, name := range []string{"out.csv", "out.fvecs", "out.npy", "a.npy"} {
		assert.NoFileExists(t, filepath.Join(dir, name))
	}
}

func TestHelpPrintsUsageAndExample(t *testing.T) {
	t.Parallel()
	calls := [][]string{{"--help"}, {"-h"}, {"help"}}
	for _, name := range commandNames() {
		calls = append(calls, []string{"help", name}, []string{name, "--help"}, []string{name, "-h"})
	}
	for _, args := range calls {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runUmbra(t, args...)
			require.Equal(t, exitOK, r.code, "%s", r)
			assert.Empty(t, r.stderr)
			assert.Contains(t, r.stdout, "Usage:")
			assert.Regexp(t, `Examples?:\n  umbra `, r.stdout)
		})
	}
}

// TestHelpNamesEveryFlag: every command has a summary, words of its own
// and examples, and its help names every flag and argument the command
// really declares, each with help of its own.
func TestHelpNamesEveryFlag(t *testing.T) {
	t.Parallel()
	parser, err := kong.New(&grammar{})
	require.NoError(t, err)
	var inGrammar []string
	for _, n := range parser.Model.Node.Children {
		inGrammar = append(inGrammar, n.Name)
	}
	require.Equal(t, []string{"probe", "build", "add", "delete", "info", "get", "search", "export", "checkpoint", "compact", "convert", "version", "serve", "repair", "help"}, inGrammar)
	for _, node := range parser.Model.Node.Children {
		var help bytes.Buffer
		require.NoError(t, cmdline.PrintHelp(&grammar{}, []string{node.Name}, program(&help), &help))
		assert.NotEmpty(t, node.Help, "summary of %s", node.Name)
		assert.Contains(t, help.String(), node.Help, "umbra help %s", node.Name)
		assert.NotEmpty(t, node.Detail, "umbra help %s says what the command does", node.Name)
		assert.Regexp(t, `Examples?:\n  umbra `+node.Name, help.String(), "umbra help %s", node.Name)
		for _, f := range node.Flags {
			flag := "--" + f.Name + "=" + f.FormatPlaceHolder()
			if f.IsBool() {
				flag = "--" + f.Name + " "
			}
			assert.Contains(t, help.String(), flag, "umbra help %s", node.Name)
			assert.NotEmpty(t, f.Help, "--%s of %s", f.Name, node.Name)
		}
		for _, a := range node.Positional {
			if !a.Tag.Hidden {
				assert.Contains(t, help.String(), "<"+a.Name+">", "umbra help %s", node.Name)
				assert.NotEmpty(t, a.Help, "%s of %s", a.Name, node.Name)
			}
		}
	}
}

// TestCommandHelpIsItsOwn: a command's --help is kong's, generated from
// that command's grammar: its own flags with their help and defaults, the
// shared adapter flags where the command opens a GPU, and no other
// command's flags.
func TestCommandHelpIsItsOwn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command  string
		want     []string
		wantNone []string
	}{
		{"search", []string{"Usage: umbra search", "--queries=FILE", "the query vectors", "--metric=M", "(default cosine)", "--device=D", "(default auto)",
			"--backend=B", "--adapter=NAME", "--power=P", "(default high)", "--json"}, []string{"--dtype=", "--upsert", "--ids-out=", "<args>"}},
		{"probe", []string{"Usage: umbra probe", "--backend=B", "--adapter=NAME", "--power=P", "--json"}, []string{"--queries=", "--data=", "--device="}},
		{"convert", []string{"Usage: umbra convert", "<in>", "<out>", "--dtype=T", "(default f32)"}, []string{"--backend=", "--queries=", "--json"}},
		{"add", []string{"Usage: umbra add", "<store>", "--data=FILE", "--upsert"}, []string{"--backend=", "--queries=", "--dtype="}},
		// export opens the store read-only beside a writer: its help says so
		// and does not say it fails while another process writes.
		{"export", []string{"Usage: umbra export", "<store>", "--out=FILE.npy", "--ids-out=FILE.npy", "--keys-out=FILE", "read-only",
			"without its lock", "empty line"}, []string{"--backend=", "--queries=", "fails while", "is locked"}},
		{"get", []string{"Usage: umbra get", "<store>", "--ids=LIST", "--keys=LIST", "--json", "read-only"}, []string{"--backend=", "--queries="}},
		{"delete", []string{"Usage: umbra delete", "<store>", "--ids=LIST", "--ids-file=FILE", "--keys=LIST", "--keys-file=FILE"}, []string{"--backend=", "--json"}},
		{"compact", []string{"Usage: umbra compact", "<store>", "checkpoint"}, []string{"--backend=", "--json"}},
		{"checkpoint", []string{"Usage: umbra checkpoint", "<store>", "STORE.log"}, []string{"--backend=", "--json"}},
	}
	for _, tc := range tests {
		t.Run(tc.command, func(t *testing.T) {
			for _, args := range [][]string{{tc.command, "--help"}, {"help", tc.command}} {
				r := runUmbra(t, args...)
				require.Equal(t, exitOK, r.code, "%s", r)
				for _, w := range tc.want {
					assert.Contains(t, r.stdout, w, "umbra %s", strings.Join(args, " "))
				}
				for _, w := range tc.wantNone {
					assert.NotContains(t, r.stdout, w, "umbra %s", strings.Join(args, " "))
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runUmbra(t, "version")
	require.Equal(t, exitOK, r.code, "%s", r)
	assert.Contains(t, r.stdout, runtime.Version())
	if engine.GPUSupport() {
		assert.Contains(t, r.stdout, "gpu         yes")
	}

	r = runUmbra(t, "version", "--json")
	require.Equal(t, exitOK, r.code, "%s", r)
	var v versionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Equal(t, runtime.Version(), v.Go)
	assert.Equal(t, engine.GPUSupport(), v.GPUSupport)
	assert.Regexp(t, `^v\d`, v.Version, "a module version or the fallback, never (devel)")
	assert.NotEmpty(t, v.CPUKernel)

	r = runUmbra(t, "--version")
	require.Equal(t, exitOK, r.code, "%s", r)
	assert.Contains(t, r.stdout, "umbra ")
}

func TestNoGPUBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a second binary")
	}
	bin := nogpuBinary(t)

	r := runBinary(t, bin, "version", "--json")
	require.Equal(t, exitOK, r.code, "%s", r)
	var v versionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	assert.False(t, v.GPUSupport)

	r = runBinary(t, bin, "probe", "--json")
	require.Equal(t, exitFailure, r.code, "%s", r)
	requireErrorLine(t, r)
	var p probeJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
	assert.False(t, p.GPUSupport)
	assert.Empty(t, p.Adapters)
	assert.Nil(t, p.Auto)
	require.Len(t, p.Findings, 1)
	assert.Equal(t, causeNoGPUSupport, p.Findings[0].Cause)

	dir := t.TempDir()
	rng := testkit.Rand(t)
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 20, 5), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, 5), "")
	r = runBinary(t, bin, "search", "--data", data, "--queries", queries, "--k", "2", "--device", "gpu")
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "without GPU support")

	r = runBinary(t, bin, "search", "--data", data, "--queries", queries, "--k", "2", "--json")
	require.Equal(t, exitOK, r.code, "%s", r)
	var s searchJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "cpu", s.Backend)
	assert.Contains(t, s.Reason, "without GPU support")
}
