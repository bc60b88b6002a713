package cmdline

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// tool is a program with the shared adapter flags and one of each kind of
// value, as the three commands declare them.
type tool struct {
	Adapter  Adapter       `embed:""`
	N        int           `name:"n" default:"50000" help:"rows"`
	Seed     uint64        `name:"seed" help:"seed"`
	Ratio    float64       `name:"ratio" help:"ratio"`
	Wait     time.Duration `name:"wait" default:"2s" help:"how long"`
	Metric   Choice        `name:"metric" choices:"cosine,dot,l2" default:"cosine" help:"metric"`
	Verbose  bool          `name:"v" help:"talk"`
	Args     []string      `arg:"" optional:"" hidden:""`
	Location string        `name:"data" placeholder:"FILE" help:"the vectors"`
}

func (*tool) Examples() []string { return []string{"tool --n 10"} }

func parseTool(t *testing.T, args ...string) (*tool, error) {
	t.Helper()
	var g tool
	_, helped, err := Parse(&g, args, Options{Name: "tool"})
	assert.False(t, helped)
	return &g, err
}

func TestAdapterFlags(t *testing.T) {
	tests := []struct {
		args []string
		want engine.AdapterSelect
	}{
		{nil, engine.AdapterSelect{}},
		{[]string{"--backend", "VULKAN", "--adapter", "Radeon", "--power", "low"}, engine.AdapterSelect{Backend: "vulkan", Name: "Radeon", LowPower: true}},
		{[]string{"-backend=gl", "-adapter", "llvmpipe", "-power=HIGH"}, engine.AdapterSelect{Backend: "gl", Name: "llvmpipe"}},
		{[]string{"--backend="}, engine.AdapterSelect{}},
	}
	for _, tc := range tests {
		g, err := parseTool(t, tc.args...)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, g.Adapter.Select(), "%q", tc.args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "cuda"}, `--backend: unknown backend "cuda": want vulkan, metal, dx12 or gl`},
		{[]string{"--power", "max"}, `--power: unknown power "max": want high or low`},
		{[]string{"--power", ""}, `--power: unknown power "": want high or low`},
		{[]string{"--adapter"}, "--adapter: needs a value"},
		{[]string{"--adapter", "--backend", "gl"}, "--adapter: needs a value, got the flag --backend"},
	} {
		_, err := parseTool(t, tc.args...)
		assert.EqualError(t, err, tc.want, "%q", tc.args)
	}
}

func TestValues(t *testing.T) {
	g, err := parseTool(t, "-n", "-3", "--seed=7", "--ratio", "-0.5", "--wait", "-1s", "-metric", "L2", "-v", "stray")
	require.NoError(t, err)
	assert.Equal(t, &tool{N: -3, Seed: 7, Ratio: -0.5, Wait: -time.Second, Metric: "l2", Verbose: true, Args: []string{"stray"},
		Adapter: Adapter{Power: "high"}}, g)

	g, err = parseTool(t)
	require.NoError(t, err)
	assert.Equal(t, 50000, g.N)
	assert.Equal(t, 2*time.Second, g.Wait)
	assert.Equal(t, Choice("cosine"), g.Metric)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--n", "many"}, `--n: invalid value "many": want a whole number`},
		{[]string{"--seed", "-1"}, `--seed: invalid value "-1": want a whole number from 0`},
		{[]string{"--wait", "soon"}, `--wait: invalid value "soon": want a duration such as 500ms, 2s or 1m`},
		{[]string{"--metric", "hamming"}, `--metric: unknown metric "hamming": want cosine, dot or l2`},
		{[]string{"--turbo"}, "unknown flag --turbo"},
	} {
		_, err := parseTool(t, tc.args...)
		assert.EqualError(t, err, tc.want, "%q", tc.args)
	}
}

func TestGiven(t *testing.T) {
	var g tool
	kctx, _, err := Parse(&g, []string{"--seed", "0", "-data", "x.npy"}, Options{Name: "tool"})
	require.NoError(t, err)
	assert.True(t, Given(kctx, "seed"), "given as 0")
	assert.True(t, Given(kctx, "data"))
	assert.False(t, Given(kctx, "n"), "a default is not given")
	assert.False(t, Given(kctx, "backend"))
}

// TestHelp: kong's help of the program's own flags, their defaults, the
// adapter flags, the examples, and nothing hidden.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	var g tool
	_, helped, err := Parse(&g, []string{"-h"}, Options{Name: "tool", Description: "A tool.", Help: &out})
	require.NoError(t, err)
	require.True(t, helped)
	help := out.String()
	for _, want := range []string{"Usage: tool [flags]", "A tool.", "--n=50000", "--wait=2s", "--data=FILE", "the vectors",
		"--backend=B", "--adapter=NAME", "--power=P", "(default high)", "Example:\n  tool --n 10\n"} {
		assert.Contains(t, help, want)
	}
	assert.NotContains(t, help, "<args>")
	assert.NotContains(t, help, "(default 50000)", "kong shows it as the placeholder")

	out.Reset()
	require.NoError(t, PrintHelp(&tool{}, nil, Options{Name: "tool", Description: "A tool."}, &out))
	assert.Equal(t, help, out.String(), "PrintHelp prints the same as -h")
}
