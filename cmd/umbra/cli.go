package main

import (
	"context"
	"io"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra/cmd/internal/cmdline"
)

// grammar is umbra's command line as kong reads it: one field per command,
// each a struct whose fields are the command's flags and arguments. The
// help kong prints for a command comes from the same place: the help tag
// of the field here (its one-line summary), the help tags of its flags,
// and its Help and Examples methods.
type grammar struct {
	Probe      probeCmd      `cmd:"" name:"probe" help:"list GPU adapters, test each one, and say which one umbra would use"`
	Build      buildCmd      `cmd:"" name:"build" help:"write a store from a vector file, with optional IDs or keys"`
	Add        addCmd        `cmd:"" name:"add" help:"add vectors to a store, or replace them with --upsert"`
	Delete     deleteCmd     `cmd:"" name:"delete" help:"delete vectors from a store by ID or key"`
	Info       infoCmd       `cmd:"" name:"info" help:"describe a store: dimension, metric, count, IDs, keys, deleted rows, file sizes"`
	Get        getCmd        `cmd:"" name:"get" help:"print the vectors a store holds under given IDs or keys"`
	Search     searchCmd     `cmd:"" name:"search" help:"find the k most similar vectors of a data file or a store for each query"`
	Export     exportCmd     `cmd:"" name:"export" help:"write a store's vectors, IDs and keys to files that build reads back"`
	Checkpoint checkpointCmd `cmd:"" name:"checkpoint" help:"fold a store's log into its base file"`
	Compact    compactCmd    `cmd:"" name:"compact" help:"drop a store's deleted rows for good, then checkpoint it"`
	Convert    convertCmd    `cmd:"" name:"convert" help:"convert a vector file between .npy (float32, float16) and .fvecs"`
	Version    versionCmd    `cmd:"" name:"version" help:"print the version, the Go version and whether GPU support is built in"`
	Serve      serveCmd      `cmd:"" name:"serve" help:"run an umbra cluster node (NATS JetStream; embedded without --nats)"`
	Repair     repairCmd     `cmd:"" name:"repair" help:"find where a cluster shard stopped, and record a skip its replicas follow"`
	HelpCmd    helpCmd       `cmd:"" name:"help" help:"show help for umbra or one command"`
}

func (*grammar) Help() string {
	return `Flags go after the command, and may be written -flag or --flag, and
--flag=value or --flag value. Exit status: 0 success, 1 failure, 2 usage
error; an error is one line on stderr starting with "umbra: ".`
}

func (*grammar) Examples() []string {
	return []string{
		"umbra probe",
		"umbra search --data vectors.npy --queries queries.npy --k 10",
		"umbra build --data vectors.npy --out vectors.umbra",
		"umbra add vectors.umbra --data more.npy",
		"umbra search --store vectors.umbra --queries queries.npy --k 10",
		"umbra convert base.fvecs base.npy --dtype f16",
	}
}

// program describes umbra to cmdline; help goes to w.
func program(w io.Writer) cmdline.Options {
	return cmdline.Options{
		Name:        "umbra",
		Description: "Exact similarity search on the GPU (wgpu: Vulkan, Metal, DX12, GL) or the CPU.",
		Help:        w,
	}
}

// commandNames lists the commands of the grammar, in the order help lists
// them.
func commandNames() []string {
	parser, err := cmdline.New(&grammar{}, cmdline.Options{}, nil)
	if err != nil {
		panic(err) // the grammar itself is wrong: every test fails on it
	}
	var names []string
	for _, n := range parser.Model.Node.Children {
		names = append(names, n.Name)
	}
	return names
}

// parse reads args of the command name into a fresh grammar. It returns
// the kong context to run, or helped when --help printed the command's
// help on stdout instead.
func parse(e *env, name string, args []string) (kctx *kong.Context, helped bool, err error) {
	return cmdline.Parse(&grammar{}, append([]string{name}, args...), program(e.stdout))
}

// choice is a flag restricted to the values of its choices tag.
type choice = cmdline.Choice

// runCommand runs the command kctx selected.
func runCommand(ctx context.Context, e *env, kctx *kong.Context) error {
	kctx.BindTo(ctx, (*context.Context)(nil))
	return kctx.Run(e)
}
