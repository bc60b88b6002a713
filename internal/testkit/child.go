package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ChildEnv names the role a test binary plays when a test starts it again
// (the re-exec pattern of Go's own os/exec tests).
const ChildEnv = "UMBRA_TEST_CHILD"

// Main is a package's TestMain: in a binary Child started, it runs the
// role's function and exits with the status that returns; anywhere else it
// runs the tests.
func Main(m *testing.M, roles map[string]func() int) {
	if role := os.Getenv(ChildEnv); role != "" {
		f, ok := roles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "testkit: this test binary has no child role %q\n", role)
			os.Exit(2)
		}
		os.Exit(f())
	}
	os.Exit(m.Run())
}

// Child returns a command that starts this test binary again in role (see
// Main), running no test. Its environment is this process's with env's
// "KEY=value" entries on top; an entry "KEY=" removes KEY.
func Child(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = Env(append(env, ChildEnv+"="+role)...)
	return cmd
}

// Env is this process's environment with env's "KEY=value" entries on top;
// an entry "KEY=" removes KEY.
func Env(env ...string) []string {
	drop := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		drop[k] = true
	}
	var out []string
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); !drop[k] {
			out = append(out, e)
		}
	}
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// Output is what a finished process printed and its exit status.
type Output struct {
	Stdout, Stderr string
	Code           int
}

// Run runs cmd to its end, collecting what it prints unless its Stdout or
// Stderr is already set. A non-zero exit is an Output, not a failure; a
// command that could not run at all fails t.
func Run(t testing.TB, cmd *exec.Cmd) Output {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	err := cmd.Run()
	out := Output{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		out.Code = exit.ExitCode()
	default:
		t.Fatalf("running %s: %v", strings.Join(cmd.Args, " "), err)
	}
	return out
}
