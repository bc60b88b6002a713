package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/cmd/internal/quiet"
	"github.com/umbravec/umbra/engine"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// env is what a command may touch of the process.
type env struct {
	stdout, stderr io.Writer
	progress       *progress
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func main() {
	quiet.Wayland()
	engine.ServeGPUChildIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, let a second one kill the process: a
		// file load cannot be interrupted.
		<-ctx.Done()
		stop()
	}()
	e := &env{stdout: os.Stdout, stderr: os.Stderr, progress: newProgress(os.Stderr, stderrIsTerminal())}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run dispatches args (without the program name) and returns the exit status.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		writeMainUsage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		writeMainUsage(e.stdout)
		return exitOK
	case "-v", "-version", "--version":
		name = "version"
	}
	if !slices.Contains(commandNames(), name) {
		if strings.HasPrefix(name, "-") {
			return fail(e, usagef("flags go after the command: umbra <command> [flags] (unknown %s; see 'umbra help')", name))
		}
		return fail(e, usagef("unknown command %q (see 'umbra help')", name))
	}
	kctx, helped, err := parse(e, name, args[1:])
	if helped {
		return exitOK
	}
	if err == nil {
		err = runCommand(ctx, e, kctx)
	}
	if err != nil {
		var ue *usageError
		var pe *kong.ParseError
		switch {
		case errors.As(err, &ue):
			return fail(e, usagef("%s: %s (see 'umbra help %s')", name, ue.msg, name))
		case errors.As(err, &pe):
			return fail(e, usagef("%s: %s (see 'umbra help %s')", name, cause(pe.Unwrap()), name))
		case ctx.Err() != nil:
			// Whatever failed, it failed because of the signal.
			return fail(e, errors.New("interrupted"))
		}
		return fail(e, err)
	}
	return exitOK
}

// fail prints err as one line on stderr and returns its exit status.
func fail(e *env, err error) int {
	e.progress.clear()
	fmt.Fprintln(e.stderr, "umbra: "+oneLine(err.Error()))
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

// oneLine folds a message onto one line: an error is reported in one.
// The engine's and host's messages name what failed, not their package,
// so they read the same embedded in ours.
func oneLine(msg string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(msg), "\n", "; ")), " ")
}

// cause returns err's message for embedding after context of our own.
func cause(err error) string { return oneLine(err.Error()) }

// writeMainUsage prints umbra's own help: its commands, with examples.
func writeMainUsage(w io.Writer) {
	_ = cmdline.PrintHelp(&grammar{}, nil, program(w), w)
}

type helpCmd struct {
	Commands []string `arg:"" optional:"" name:"command" help:"the command to describe"`
}

func (*helpCmd) Help() string {
	return "Print the list of commands, or the help of one command: what it does, its flags and arguments, and examples."
}

func (*helpCmd) Examples() []string { return []string{"umbra help search"} }

func (h *helpCmd) Run(e *env) error {
	switch len(h.Commands) {
	case 0:
		writeMainUsage(e.stdout)
		return nil
	case 1:
		if !slices.Contains(commandNames(), h.Commands[0]) {
			return usagef("unknown command %q", h.Commands[0])
		}
		return cmdline.PrintHelp(&grammar{}, h.Commands, program(e.stdout), e.stdout)
	}
	return usagef("want at most one command name, got %d arguments", len(h.Commands))
}
