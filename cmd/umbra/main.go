package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand. setup declares the command's flags on fs and
// returns the function that runs it with the positional arguments; keeping
// declaration apart from running lets help and tests see every flag.
type command struct {
	name     string
	summary  string // one line for the command list
	synopsis string // after "umbra "
	help     string // what it does, its flags and arguments
	example  string
	setup    func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

// commands is the command table, in the order help lists them. Store-file
// commands (build, info) join here; search's --store joins search's flags.
// (Filled in init: help looks commands up, which a package-level
// initialiser could not refer to.)
var commands []*command

func init() {
	commands = []*command{probeCommand, searchCommand, convertCommand, versionCommand, helpCommand}
}

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
	fs := newFlagSet(c)
	runFn := c.setup(fs)
	pos, err := parseArgs(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		writeUsage(e.stdout, c)
		return exitOK
	}
	if err != nil {
		return fail(e, usagef("%s: %s (see 'umbra help %s')", c.name, flagMessage(err), c.name))
	}
	if err := runFn(ctx, e, pos); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return fail(e, usagef("%s: %s (see 'umbra help %s')", c.name, ue.msg, c.name))
		}
		if ctx.Err() != nil {
			// Whatever failed, it failed because of the signal.
			return fail(e, errors.New("interrupted"))
		}
		return fail(e, err)
	}
	return exitOK
}

func newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("umbra "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by fail, help by writeUsage
	return fs
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

// oneLine drops the package prefixes the engine and host put on their
// errors (main adds its own) and folds the message onto one line.
func oneLine(msg string) string {
	for {
		trimmed := strings.TrimPrefix(strings.TrimPrefix(msg, "umbra: "), "host: ")
		if trimmed == msg {
			break
		}
		msg = trimmed
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(msg), "\n", "; ")), " ")
}

// cause returns err's message for embedding after context of our own.
func cause(err error) string { return oneLine(err.Error()) }

// parseArgs parses flags anywhere among args, so that both
// "convert in.npy out.npy --dtype f16" and "convert --dtype f16 in.npy out.npy"
// work. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" && !takesValue(fs, consumed) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// takesValue reports whether the final "--" in consumed was the value of
// the flag before it ("--adapter --") rather than the end of flags.
func takesValue(fs *flag.FlagSet, consumed []string) bool {
	if len(consumed) < 2 {
		return false
	}
	prev := strings.TrimLeft(consumed[len(consumed)-2], "-")
	if strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(prev)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// flagMessage rewrites the flag package's errors to name flags the way the
// help text does (--k, not -k).
func flagMessage(err error) string {
	return strings.NewReplacer("flag -", "flag --", ": -", ": --", "for -", "for --").Replace(err.Error())
}

// choice is a string flag restricted to a few values (case-insensitive).
type choice struct {
	value   string
	allowed []string
}

func newChoice(def string, allowed ...string) *choice { return &choice{value: def, allowed: allowed} }

func (c *choice) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choice) Set(s string) error {
	s = strings.ToLower(s)
	if !slices.Contains(c.allowed, s) {
		return fmt.Errorf("want %s", orList(c.allowed))
	}
	c.value = s
	return nil
}

func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

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
	setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		return func(ctx context.Context, e *env, args []string) error {
			switch len(args) {
			case 0:
				writeMainUsage(e.stdout)
				return nil
			case 1:
				c := lookup(args[0])
				if c == nil {
					return usagef("unknown command %q", args[0])
				}
				writeUsage(e.stdout, c)
				return nil
			}
			return usagef("want at most one command name, got %d arguments", len(args))
		}
	},
}
