package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra/engine"
)

// grammar is umbra's command line as kong reads it: one field per command,
// each a struct whose fields are the command's flags and arguments. Help
// text lives in the commands table (main.go), not in tags: it is written
// by hand, with examples, and a test checks that it names every flag
// declared here.
type grammar struct {
	Probe   probeCmd   `cmd:"" name:"probe"`
	Build   buildCmd   `cmd:"" name:"build"`
	Add     addCmd     `cmd:"" name:"add"`
	Delete  deleteCmd  `cmd:"" name:"delete"`
	Info    infoCmd    `cmd:"" name:"info"`
	Search  searchCmd  `cmd:"" name:"search"`
	Export  exportCmd  `cmd:"" name:"export"`
	Convert convertCmd `cmd:"" name:"convert"`
	Version versionCmd `cmd:"" name:"version"`
	Help    helpCmd    `cmd:"" name:"help"`
}

// selectionFlags choose the GPU adapter. Probe and search embed them, and
// so will every command that opens an index: one definition, one
// validation, one help text.
type selectionFlags struct {
	Backend choice `name:"backend" choices:"vulkan,metal,dx12,gl" placeholder:"B"`
	Adapter string `name:"adapter" placeholder:"NAME"`
	Power   choice `name:"power" choices:"high,low" default:"high" placeholder:"P"`
}

// selectionHelp documents selectionFlags in every command that embeds them.
const selectionHelp = `
  --backend B      only adapters of this graphics API: vulkan, metal, dx12 or gl
  --adapter NAME   only adapters whose name, vendor or driver contains NAME
                   (see 'umbra probe')
  --power P        high (default; discrete GPUs first) or low (integrated first)`

func (s selectionFlags) adapterSelect() engine.AdapterSelect {
	as := engine.AdapterSelect{Backend: string(s.Backend), Name: s.Adapter, Power: engine.HighPerformance}
	if s.Power == "low" {
		as.Power = engine.LowPower
	}
	return as
}

// parse reads args (the command name first) into a fresh grammar. It
// returns the kong context to run, or helped when --help printed the
// command's usage on stdout instead.
func parse(e *env, c *command, args []string) (kctx *kong.Context, helped bool, err error) {
	var g grammar
	parser, err := kong.New(&g,
		kong.Name("umbra"),
		kong.Writers(io.Discard, io.Discard), // fail reports errors
		kong.Help(func(kong.HelpOptions, *kong.Context) error {
			writeUsage(e.stdout, c)
			helped = true
			return nil
		}),
		kong.Exit(func(int) {}), // run returns the exit status
		kong.TypeMapper(reflect.TypeFor[string](), kong.MapperFunc(decodeString)),
	)
	if err != nil {
		return nil, false, err // the grammar itself is wrong: a bug, not a usage error
	}
	node := commandNode(parser.Model.Node, c.name)
	if node == nil {
		return nil, false, fmt.Errorf("command %q is in the table but not in the grammar", c.name)
	}
	kctx, err = parser.Parse(append([]string{c.name}, dashDash(node, args)...))
	if helped {
		// kong goes on checking the line after printing help; what it
		// finds does not matter to someone who asked for help.
		return nil, true, nil
	}
	return kctx, false, err
}

func commandNode(root *kong.Node, name string) *kong.Node {
	for _, n := range root.Children {
		if n.Type == kong.CommandNode && n.Name == name {
			return n
		}
	}
	return nil
}

// dashDash respells -name and -name=value as --name and --name=value for
// the flags node declares. The command line has always taken one dash or
// two (the standard flag package's rule, and the README's promise); kong
// reads a single dash as a cluster of one-letter flags. Nothing after "--"
// is touched, nor anything that is not a declared flag's name.
func dashDash(node *kong.Node, args []string) []string {
	known := map[string]bool{"help": true}
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			known[f.Name] = true
		}
	}
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if known[name] {
			out[i] = "-" + a
		}
	}
	return out
}

// flagValue pops the value of the flag being decoded. kong's own message
// for a missing value names token types ("got "<EOL>" (EOL)"); this one
// says what is wrong.
func flagValue(ctx *kong.DecodeContext) (string, error) {
	t := ctx.Scan.Peek()
	if t.IsEOL() {
		return "", errors.New("needs a value")
	}
	if _, err := strconv.ParseFloat(t.String(), 64); !t.IsValue() && err != nil {
		// A negative number is a value (--k -2); anything else with a
		// leading dash is the next flag.
		return "", fmt.Errorf("needs a value, got the flag %s", t)
	}
	ctx.Scan.Pop()
	return t.String(), nil
}

// decodeString reads every string flag and argument.
func decodeString(ctx *kong.DecodeContext, target reflect.Value) error {
	s, err := flagValue(ctx)
	if err != nil {
		return err
	}
	target.SetString(s)
	return nil
}

// choice is a flag restricted to the values in its field's choices tag,
// case-insensitively.
type choice string

func (c *choice) Decode(ctx *kong.DecodeContext) error {
	s, err := flagValue(ctx)
	if err != nil {
		return err
	}
	allowed := strings.Split(ctx.Value.Tag.Get("choices"), ",")
	if v := strings.ToLower(s); slices.Contains(allowed, v) {
		*c = choice(v)
		return nil
	}
	return fmt.Errorf("invalid value %q: want %s", s, orList(allowed))
}

// count is a whole-number flag (--k). kong's int message names the bit
// size; this one names what is wanted.
type count int

func (n *count) Decode(ctx *kong.DecodeContext) error {
	s, err := flagValue(ctx)
	if err != nil {
		return err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("invalid value %q: want a whole number", s)
	}
	*n = count(v)
	return nil
}

// given reports whether the command line set the flag name.
func given(kctx *kong.Context, name string) bool {
	for _, f := range kctx.Flags() {
		if f.Name == name {
			return f.Set
		}
	}
	return false
}

// onLine reports whether the command line itself gave the flag name; given
// also counts a default kong applied.
func onLine(kctx *kong.Context, name string) bool {
	for _, p := range kctx.Path {
		if p.Flag != nil && p.Flag.Name == name {
			return true
		}
	}
	return false
}

// runCommand runs the command kctx selected.
func runCommand(ctx context.Context, e *env, kctx *kong.Context) error {
	kctx.BindTo(ctx, (*context.Context)(nil))
	return kctx.Run(e)
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
