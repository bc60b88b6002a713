package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

func TestParseArgsAllowsFlagsAnywhere(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantD   string
		wantJ   bool
	}{
		{[]string{"in.npy", "out.npy", "--dtype", "f16"}, []string{"in.npy", "out.npy"}, "f16", false},
		{[]string{"--dtype=f16", "in.npy", "--json", "out.npy"}, []string{"in.npy", "out.npy"}, "f16", true},
		{[]string{"in.npy", "--", "--dtype", "out.npy"}, []string{"in.npy", "--dtype", "out.npy"}, "f32", false},
		{[]string{"--dtype", "--", "x"}, []string{"x"}, "--", false},
		{nil, nil, "f32", false},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		d := fs.String("dtype", "f32", "")
		j := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tc.args)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.wantPos, pos, "%q", tc.args)
		assert.Equal(t, tc.wantD, *d, "%q", tc.args)
		assert.Equal(t, tc.wantJ, *j, "%q", tc.args)
	}
}

func TestOneLine(t *testing.T) {
	assert.Equal(t, "value is NaN: vector 3", oneLine("umbra: value is NaN: vector 3"))
	assert.Equal(t, `malformed data file "x.npy": bad`, oneLine(`host: malformed data file "x.npy": bad`))
	assert.Equal(t, "a; b c", oneLine("a\nb  c\n"))
}

func TestProgress(t *testing.T) {
	t.Run("off when stderr is not a terminal", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, false)
		p.delay, p.every = 0, time.Millisecond
		done := p.step("loading x.npy")
		time.Sleep(20 * time.Millisecond)
		done()
		assert.Empty(t, b.String())
	})
	t.Run("quick steps draw nothing", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, true)
		p.step("loading x.npy")()
		assert.Empty(t, b.String())
	})
	t.Run("slow steps show elapsed time, then the total", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, true)
		p.delay, p.every = time.Millisecond, time.Millisecond
		done := p.step("loading x.npy")
		time.Sleep(30 * time.Millisecond)
		done()
		done() // a second call is harmless
		out := b.String()
		assert.Contains(t, out, "\r\x1b[Kloading x.npy… ")
		assert.True(t, strings.HasSuffix(out, "loading x.npy: done in 0.0s\n"), "%q", out)
		assert.Equal(t, 1, strings.Count(out, "\n"))
	})
	t.Run("an engine step shows the engine's progress", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, true)
		p.delay, p.every = time.Millisecond, time.Millisecond
		ctx, done := p.engineStep(context.Background(), "indexing 70000 rows")
		ix, err := engine.New(context.Background(), engine.Config{Dim: 2, Device: engine.CPU})
		require.NoError(t, err)
		flat := make([]float32, 2*70000)
		for i := range flat {
			flat[i] = float32(i%7) + 1
		}
		_, err = ix.AddFlat(ctx, flat)
		require.NoError(t, err)
		time.Sleep(30 * time.Millisecond)
		done()
		assert.Contains(t, b.String(), "indexing 70000 rows… validate 100% (70000/70000), ")
	})
	t.Run("clear before an error", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, true)
		p.draw("working", false)
		p.clear()
		assert.Equal(t, "\r\x1b[Kworking\r\x1b[K", b.String())
	})
}
