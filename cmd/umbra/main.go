package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra/cmd/internal/quiet"
	"github.com/umbravec/umbra/engine"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command documents one subcommand: its flags and arguments are the
// fields of its struct in grammar (cli.go), its help is written here.
type command struct {
	name     string
	summary  string // one line for the command list
	synopsis string // after "umbra "
	help     string // what it does, its flags and arguments
	example  string
}

// commands is the command table, in the order help lists them; grammar
// has a field for each.
var commands = []*command{probeCommand, buildCommand, addCommand, deleteCommand, infoCommand, searchCommand, exportCommand, convertCommand, versionCommand, helpCommand}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

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
	c := lookup(name)
	if c == nil {
		if strings.HasPrefix(name, "-") {
			return fail(e, usagef("flags go after the command: umbra <command> [flags] (unknown %s; see 'umbra help')", name))
		}
		return fail(e, usagef("unknown command %q (see 'umbra help')", name))
	}
	kctx, helped, err := parse(e, c, args[1:])
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
			return fail(e, usagef("%s: %s (see 'umbra help %s')", c.name, ue.msg, c.name))
		case errors.As(err, &pe):
			return fail(e, usagef("%s: %s (see 'umbra help %s')", c.name, cause(pe.Unwrap()), c.name))
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

func writeMainUsage(w io.Writer) {
	fmt.Fprint(w, `umbra - exact similarity search on the GPU (wgpu: Vulkan, Metal, DX12, GL) or the CPU

Usage:
  umbra <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'umbra help <command>' or 'umbra <command> --help' for a command's flags.
Flags may be written -flag or --flag, and --flag=value or --flag value.

Examples:
  umbra probe
  umbra search --data vectors.npy --queries queries.npy --k 10
  umbra build --data vectors.npy --out vectors.umbra
  umbra add vectors.umbra --data more.npy
  umbra search --store vectors.umbra --queries queries.npy --k 10
  umbra convert base.fvecs base.npy --dtype f16

Exit status: 0 success, 1 failure, 2 usage error.
`)
}

func writeUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage:\n  umbra %s\n\n%s\n", c.synopsis, strings.TrimSpace(c.help))
	fmt.Fprintf(w, "\nExample:\n%s\n", indent(strings.TrimSpace(c.example), "  "))
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

var helpCommand = &command{
	name:     "help",
	summary:  "show help for umbra or one command",
	synopsis: "help [command]",
	help:     "Print the list of commands, or the usage, flags and an example of one command.",
	example:  "umbra help search",
}

type helpCmd struct {
	Commands []string `arg:"" optional:"" name:"command"`
}

func (h *helpCmd) Run(e *env) error {
	switch len(h.Commands) {
	case 0:
		writeMainUsage(e.stdout)
		return nil
	case 1:
		c := lookup(h.Commands[0])
		if c == nil {
			return usagef("unknown command %q", h.Commands[0])
		}
		writeUsage(e.stdout, c)
		return nil
	}
	return usagef("want at most one command name, got %d arguments", len(h.Commands))
}
