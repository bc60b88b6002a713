//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestBuildShowsProgress: 'umbra build' streams --data into the index and
// its progress line shows the rows stored so far while the file is still
// arriving (a FIFO, so the count is not known before the end: "validate
// N"), then how long indexing took; the store holds every row.
func TestBuildShowsProgress(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const rows, dim = 150_000, 8 // several 1 MiB pieces
	m := randomMatrix(rng, rows, dim)
	var file bytes.Buffer
	require.NoError(t, host.WriteMatrix(&file, m, ".npy", "<f4"))
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
	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, rows, ix.Len())
}

// TestStreamWithIDs: build and add with --ids stream --data (AddFromWithIDs),
// from a file or a FIFO whose row count is not known: the store holds the
// caller's IDs; an ID count that does not match the rows, known up front
// or only at the end of a pipe, and IDs already stored fail naming --ids,
// and leave no store (build) or the store as it was (add).
func TestStreamWithIDs(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const rows, dim = 900, 12
	m := randomMatrix(rng, rows, dim)
	data := writeMatrix(t, dir, "rows.npy", m, "<f4")
	ids := make([]uint64, rows)
	for i := range ids {
		ids[i] = uint64(5000 + 3*i)
	}
	rng.Shuffle(rows, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	idFile := writeIDsText(t, dir, "ids.txt", ids)
	short := writeIDsText(t, dir, "short.txt", ids[:rows-1])

	// A FIFO fed the same file: its row count is known only at its end.
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		b, err := os.ReadFile(data)
		require.NoError(t, err)
		go func() {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				f.Write(b)
				f.Close()
			}
		}()
		return p
	}

	store := filepath.Join(dir, "s.umbra")
	r := runUmbra(t, "build", "--data", data, "--ids", short, "--out", store)
	require.NotZero(t, r.code, "%s", r)
	require.Contains(t, r.stderr, "--ids "+short, "%s", r)
	require.NoFileExists(t, store)
	r = runUmbra(t, "build", "--data", fifo("pipe1.npy"), "--ids", short, "--out", store)
	require.NotZero(t, r.code, "%s", r)
	require.Contains(t, r.stderr, "--ids "+short, "%s", r)
	require.NoFileExists(t, store)

	r = runUmbra(t, "build", "--data", fifo("pipe2.npy"), "--ids", idFile, "--out", store)
	require.Zero(t, r.code, "%s", r)
	r = runUmbra(t, "info", store, "--json")
	require.Zero(t, r.code, "%s", r)
	require.Contains(t, r.stdout, fmt.Sprintf(`"count": %d`, rows))
	require.Contains(t, r.stdout, `"min_id": 5000`)
	require.Contains(t, r.stdout, fmt.Sprintf(`"max_id": %d`, 5000+3*(rows-1)))

	// The same rows under the same IDs again: refused, the store as it was.
	before, err := os.ReadFile(store)
	require.NoError(t, err)
	r = runUmbra(t, "add", store, "--data", data, "--ids", idFile)
	require.NotZero(t, r.code, "%s", r)
	require.Contains(t, r.stderr, "--ids "+idFile, "%s", r)
	after, err := os.ReadFile(store)
	require.NoError(t, err)
	require.Equal(t, before, after)

	next := make([]uint64, rows)
	for i := range next {
		next[i] = uint64(1 + i)
	}
	r = runUmbra(t, "add", store, "--data", fifo("pipe3.npy"), "--ids", writeIDsText(t, dir, "next.txt", next))
	require.Zero(t, r.code, "%s", r)
	require.Contains(t, r.stdout, fmt.Sprintf("added %d vectors", rows))
	r = runUmbra(t, "info", store, "--json")
	require.Zero(t, r.code, "%s", r)
	require.Contains(t, r.stdout, fmt.Sprintf(`"count": %d`, 2*rows))
	require.Contains(t, r.stdout, `"min_id": 1`)

	// --keys streams the same way (AddFromWithKeys).
	var keys strings.Builder
	for i := range rows {
		fmt.Fprintf(&keys, "doc-%d\n", i)
	}
	keyFile := writeFile(t, dir, "keys.txt", []byte(keys.String()))
	keyed := filepath.Join(dir, "k.umbra")
	r = runUmbra(t, "build", "--data", fifo("pipe4.npy"), "--keys", keyFile, "--out", keyed)
	require.Zero(t, r.code, "%s", r)
	r = runUmbra(t, "info", keyed, "--json")
	require.Zero(t, r.code, "%s", r)
	require.Contains(t, r.stdout, fmt.Sprintf(`"keys": %d`, rows))
	r = runUmbra(t, "add", keyed, "--data", fifo("pipe5.npy"), "--keys", keyFile)
	require.NotZero(t, r.code, "%s", r)
	require.Contains(t, r.stderr, "--keys "+keyFile, "%s", r)
	r = runUmbra(t, "build", "--data", fifo("pipe6.npy"), "--keys", writeFile(t, dir, "few.txt", []byte("a\nb\n")), "--out", filepath.Join(dir, "few.umbra"))
	require.NotZero(t, r.code, "%s", r)
	require.Contains(t, r.stderr, "--keys", "%s", r)
	require.NoFileExists(t, filepath.Join(dir, "few.umbra"))
}
