package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

func TestFlagsGoAnywhere(t *testing.T) {
	tests := []struct {
		args        []string
		wantIn      string
		wantOut     string
		wantDtype   choice
		wantErrPart string // "" when the line parses
	}{
		{[]string{"in.npy", "out.npy", "--dtype", "f16"}, "in.npy", "out.npy", "f16", ""},
		{[]string{"--dtype=F16", "in.npy", "out.npy"}, "in.npy", "out.npy", "f16", ""},
		{[]string{"in.npy", "-dtype", "f16", "out.npy"}, "in.npy", "out.npy", "f16", ""},
		{[]string{"-dtype=f16", "in.npy", "out.npy"}, "in.npy", "out.npy", "f16", ""},
		{[]string{"--", "-in.npy", "--dtype.npy"}, "-in.npy", "--dtype.npy", "f32", ""},
		{[]string{"in.npy", "--", "--dtype", "out.npy"}, "", "", "", "got 3 arguments"},
		{[]string{"--dtype", "--", "in.npy", "out.npy"}, "", "", "", "--dtype: needs a value"},
		{[]string{"in.npy", "out.npy", "--dtype"}, "", "", "", "--dtype: needs a value"},
		{nil, "", "", "", "got 0 arguments"},
	}
	for _, tc := range tests {
		var stdout bytes.Buffer
		kctx, helped, err := parse(&env{stdout: &stdout}, convertCommand, tc.args)
		assert.False(t, helped, "%q", tc.args)
		if tc.wantErrPart != "" {
			assert.ErrorContains(t, err, tc.wantErrPart, "%q", tc.args)
			continue
		}
		require.NoError(t, err, "%q", tc.args)
		c, ok := kctx.Selected().Target.Addr().Interface().(*convertCmd)
		require.True(t, ok)
		assert.Equal(t, tc.wantIn, c.In, "%q", tc.args)
		assert.Equal(t, tc.wantOut, c.Out, "%q", tc.args)
		assert.Equal(t, tc.wantDtype, c.Dtype, "%q", tc.args)
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
		ix, err := engine.New(engine.Config{Dim: 2, Device: engine.CPU})
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
