//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

// TestBuildShowsProgress: 'umbra build' streams --data into the index and
// its progress line shows the rows stored so far while the file is still
// arriving (a FIFO, so the count is not known before the end: "validate
// N"), then how long indexing took; the store holds every row.
func TestBuildShowsProgress(t *testing.T) {
	rng := newRand(t)
	dir := t.TempDir()
	const rows, dim = 150_000, 8 // several 1 MiB pieces
	m := randomMatrix(rng, rows, dim)
	var file bytes.Buffer
	require.NoError(t, host.WriteNPY(&file, m, "<f4"))
	all := file.Bytes()
	data := filepath.Join(dir, "rows.npy")
	require.NoError(t, syscall.Mkfifo(data, 0o600))
	release := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(data, os.O_WRONLY, 0)
		if err != nil {
			wrote <- err
			return
		}
		defer f.Close()
		// All but the last row, then wait: the build is mid-file.
		cut := len(all) - 4*dim
		if _, err := f.Write(all[:cut]); err != nil {
			wrote <- err
			return
		}
		<-release
		_, err = f.Write(all[cut:])
		wrote <- err
	}()

	var line, stdout, stderr bytes.Buffer
	clock := newFakeClock()
	e := &env{stdout: &stdout, stderr: &stderr, progress: withClock(&line, true, clock)}
	store := filepath.Join(dir, "rows.umbra")
	code := make(chan int, 1)
	go func() { code <- run(context.Background(), e, []string{"build", "--data", data, "--out", store}) }()

	label := "indexing the rows of " + data
	shown := regexp.MustCompile(regexp.QuoteMeta(label+"… validate ") + `[1-9][0-9]*, [0-9.]+s`)
	// step waits for the drawing goroutine, failing if the build ended.
	step := func(wait func()) {
		done := make(chan struct{})
		go func() { wait(); close(done) }()
		select {
		case <-done:
		case c := <-code:
			t.Fatalf("build ended (exit %d) while its line was due: %s", c, stderr.String())
		}
	}
	step(clock.settle) // the step's first wait: its line is due
	for i := 0; !shown.MatchString(line.String()); i++ {
		require.Less(t, i, 100_000, "no progress shown:\n%q", line.String())
		time.Sleep(time.Millisecond) // the build reads on meanwhile
		clock.advance(200 * time.Millisecond)
		step(func() { clock.ticks <- clock.now() }) // the line is drawn...
		step(clock.settle)                          // ...and the step waits again
	}
	close(release)
	var status int
	for done := false; !done; {
		select {
		case status = <-code:
			done = true
		case <-clock.waiting: // a later step's wait, never ended
		}
	}
	require.NoError(t, <-wrote)
	require.Equal(t, exitOK, status, "stderr: %s", stderr.String())
	assert.Regexp(t, regexp.QuoteMeta(label+": done in ")+`[0-9.]+s\n$`, line.String())
	assert.Equal(t, "wrote "+store+": 150000 vectors of dimension 8, cosine, precision f32\n", stdout.String())
	ix, err := engine.OpenReadOnly(context.Background(), store, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, rows, ix.Len())
}
