package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

func TestFlagsGoAnywhere(t *testing.T) {
	t.Parallel()
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
		kctx, helped, err := parse(&env{stdout: &stdout}, "convert", tc.args)
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
	t.Parallel()
	assert.Equal(t, "a; b c", oneLine("a\nb  c\n"))
	assert.Equal(t, "umbra: value is NaN", oneLine("umbra: value is NaN"), "a message is folded, never cut")
}

// TestLibraryErrorsReadEmbedded: the engine's and host's messages name what
// failed, not their package, so the command embeds them as they are and its
// error line names umbra once.
func TestLibraryErrorsReadEmbedded(t *testing.T) {
	t.Parallel()
	ix, err := engine.New(context.Background(), engine.Config{Dim: 2, Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	_, engineErr := ix.Add(context.Background(), umbra.Vectors([][]float32{{1, float32(math.NaN())}}))
	require.ErrorIs(t, engineErr, umbra.ErrNonFinite)
	bad := filepath.Join(t.TempDir(), "bad.npy")
	require.NoError(t, os.WriteFile(bad, []byte("garbage"), 0o644))
	_, hostErr := host.ReadMatrixFile(context.Background(), bad)
	require.Error(t, hostErr)
	for _, err := range []error{engineErr, hostErr, engine.ErrBadStore, engine.ErrNoAdapter} {
		var stderr bytes.Buffer
		code := fail(&env{stderr: &stderr, progress: newProgress(io.Discard, false)}, fmt.Errorf("--data x.npy: %s", cause(err)))
		assert.Equal(t, exitFailure, code)
		line := stderr.String()
		assert.Equal(t, 1, strings.Count(line, "umbra:"), line)
		assert.NotRegexp(t, `\b(host|storefile|engine):`, line)
		assert.True(t, strings.HasPrefix(line, "umbra: --data x.npy: "), line)
	}
}

// fakeClock is a progress clock the test moves in lockstep with the
// drawing goroutine: now reads the time it was set to, and a wait ends only
// when the test calls tick.
type fakeClock struct {
	mu      sync.Mutex
	t       time.Time
	ticks   chan time.Time
	waiting chan struct{} // one token each time the goroutine starts a wait
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		ticks: make(chan time.Time), waiting: make(chan struct{}, 1)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) after(time.Duration) <-chan time.Time {
	c.waiting <- struct{}{}
	return c.ticks
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// settle returns once the goroutine has drawn what it was told to and is
// waiting again, so that moving the clock cannot change that line.
func (c *fakeClock) settle() { <-c.waiting }

// tick lets d pass and ends the goroutine's current wait.
func (c *fakeClock) tick(d time.Duration) {
	c.settle()
	c.advance(d)
	c.ticks <- c.now()
}

// withClock returns a progress on w drawing on c's time.
func withClock(w *bytes.Buffer, enabled bool, c *fakeClock) *progress {
	p := newProgress(w, enabled)
	p.now, p.after = c.now, c.after
	return p
}

func TestProgress(t *testing.T) {
	t.Parallel()
	t.Run("off when stderr is not a terminal", func(t *testing.T) {
		var b bytes.Buffer
		clock := newFakeClock()
		p := withClock(&b, false, clock)
		done := p.step("loading x.npy")
		clock.advance(5 * time.Second)
		done()
		assert.Empty(t, b.String())
	})
	t.Run("quick steps draw nothing", func(t *testing.T) {
		var b bytes.Buffer
		clock := newFakeClock()
		p := withClock(&b, true, clock)
		done := p.step("loading x.npy")
		clock.advance(300 * time.Millisecond) // done before the delay ends
		done()
		assert.Empty(t, b.String())
	})
	t.Run("slow steps show elapsed time, then the total", func(t *testing.T) {
		var b bytes.Buffer
		clock := newFakeClock()
		p := withClock(&b, true, clock)
		done := p.step("loading x.npy")
		clock.tick(1200 * time.Millisecond) // the delay ends: the line appears
		clock.tick(1300 * time.Millisecond) // a redraw
		clock.settle()
		clock.advance(100 * time.Millisecond)
		done()
		done() // a second call is harmless
		assert.Equal(t, "\r\x1b[Kloading x.npy… 1.2s\r\x1b[Kloading x.npy… 2.5s\r\x1b[Kloading x.npy: done in 2.6s\n", b.String())
	})
	t.Run("an engine step shows the engine's progress", func(t *testing.T) {
		var b bytes.Buffer
		clock := newFakeClock()
		p := withClock(&b, true, clock)
		ctx, done := p.engineStep(context.Background(), "indexing 70000 rows")
		ix, err := engine.New(context.Background(), engine.Config{Dim: 2, Device: engine.CPU})
		require.NoError(t, err)
		defer ix.Close()
		flat := make([]float32, 2*70000)
		for i := range flat {
			flat[i] = float32(i%7) + 1
		}
		_, err = ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
		require.NoError(t, err)
		clock.tick(3 * time.Second)
		done()
		assert.Equal(t, "\r\x1b[Kindexing 70000 rows… validate 100% (70000/70000), 3.0s\r\x1b[Kindexing 70000 rows: done in 3.0s\n", b.String())
	})
	t.Run("clear before an error", func(t *testing.T) {
		var b bytes.Buffer
		p := newProgress(&b, true)
		p.draw("working", false)
		p.clear()
		assert.Equal(t, "\r\x1b[Kworking\r\x1b[K", b.String())
	})
}
