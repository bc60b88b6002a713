//go:build unix

package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

const crashDim = 16

// crashOp is operation i of the sequence seed names, given the IDs stored
// so far (ascending); it depends on nothing else, so the parent can replay
// the child's sequence. kind: "add", "upsert", "delete" or "checkpoint".
func crashOp(seed uint64, i int, stored []uint64, next uint64) (kind string, ids []uint64, vs [][]float32) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	switch k := r.IntN(20); {
	case k < 9 || len(stored) < 4:
		n := 1 + r.IntN(20)
		for j := 0; j < n; j++ {
			ids = append(ids, next+uint64(j))
		}
		return "add", ids, testkit.Vectors(r, n, crashDim)
	case k < 14:
		ids = []uint64{stored[r.IntN(len(stored))], next}
		return "upsert", ids, testkit.Vectors(r, 2, crashDim)
	case k < 19:
		return "delete", []uint64{stored[r.IntN(len(stored))]}, nil
	}
	return "checkpoint", nil, nil
}

// crashAttrs are the metadata and payloads operation i gives its n rows:
// every other write has them (logged with its rows in one record), the
// others none (an upsert without them keeps the replaced rows' own).
func crashAttrs(i, n int) ([]meta.Fields, [][]byte, bool) {
	if i%2 == 1 {
		return nil, nil, false
	}
	fs, ps := make([]meta.Fields, n), make([][]byte, n)
	for j := range fs {
		fs[j] = meta.Fields{"op": meta.IntOf(int64(i)), "tags": meta.TagsOf(fmt.Sprint("t", i%3), fmt.Sprint("r", j%2))}
		if j%3 != 2 {
			ps[j] = fmt.Appendf(nil, `{"op":%d,"row":%d}`, i, j)
		}
	}
	return fs, ps, true
}

// crashRow is what the model holds of a stored row.
type crashRow struct {
	v       []float32
	fields  meta.Fields
	payload []byte
}

// crashModel applies n operations of the sequence to a model.
func crashModel(seed uint64, n int) map[uint64]crashRow {
	md := map[uint64]crashRow{}
	next := uint64(0)
	for i := 0; i < n; i++ {
		kind, ids, vs := crashOp(seed, i, slices.Sorted(maps.Keys(md)), next)
		switch kind {
		case "add", "upsert":
			fs, ps, given := crashAttrs(i, len(ids))
			for j, id := range ids {
				row := md[id]
				row.v = unit(vs[j])
				if given {
					row.fields, row.payload = fs[j], ps[j]
				}
				md[id] = row
				next = max(next, id+1)
			}
		case "delete":
			delete(md, ids[0])
		}
	}
	return md
}

// TestMain serves as an isolated index's GPU child when started as one
// (after unservedChild, which plays a program that does not); started by
// testkit.Child it plays the crash test's writer (UMBRA_CRASH_CHILD names a
// store and a seed), the mapped store's fault child (UMBRA_SIGBUS_CHILD
// names a store) or a process without a Vulkan driver.
func TestMain(m *testing.M) {
	unservedChild()
	engine.ServeGPUChildIfRequested()
	testkit.Main(m, map[string]func() int{
		"crash":     func() int { return childExit("crash child", crashChild(os.Getenv("UMBRA_CRASH_CHILD"))) },
		"sigbus":    func() int { return childExit("sigbus child", sigbusChild(os.Getenv("UMBRA_SIGBUS_CHILD"))) },
		"no-driver": noDriverChild,
	})
}

// childExit is a child's exit status: 0, or 2 after saying what failed.
func childExit(what string, err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 2
	}
	return 0
}

// crashChild runs the operation sequence against a store, printing each
// operation's number once the call has returned, until it is killed.
func crashChild(spec string) error {
	path, seedText, _ := strings.Cut(spec, ",")
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ix, err := engine.Open(ctx, path, engine.Config{Dim: crashDim, Device: engine.CPU})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	md := map[uint64]bool{}
	next := uint64(0)
	for i := 0; ; i++ {
		kind, ids, vs := crashOp(seed, i, slices.Sorted(maps.Keys(md)), next)
		opts := []umbra.WriteOption{umbra.WithIDs(ids...)}
		if fs, ps, given := crashAttrs(i, len(ids)); given {
			opts = append(opts, umbra.WithMeta(fs...), umbra.WithPayloads(ps...))
		}
		switch kind {
		case "add":
			_, err = ix.Add(ctx, umbra.Vectors(vs), opts...)
		case "upsert":
			_, err = ix.Upsert(ctx, umbra.Vectors(vs), opts...)
		case "delete":
			err = ix.Delete(ctx, umbra.WithIDs(ids...))
		case "checkpoint":
			err = ix.Checkpoint(ctx)
		}
		if err != nil {
			return fmt.Errorf("operation %d (%s): %w", i, kind, err)
		}
		for _, id := range ids {
			if kind == "delete" {
				delete(md, id)
			} else {
				md[id] = true
				next = max(next, id+1)
			}
		}
		fmt.Fprintf(out, "ack %d\n", i)
		out.Flush()
	}
}

// TestKilledWriterLosesNothingAcknowledged kills (SIGKILL) a process that
// writes to a store at random moments — while adding, upserting, deleting
// and checkpointing, every other write with metadata and payloads — and
// reopens the store each time: it must open cleanly and hold exactly the
// first n operations (vectors, metadata and payloads), where n is the number
// the child acknowledged or one more (the call in flight may have become
// durable before it could say so), never anything in between.
func TestKilledWriterLosesNothingAcknowledged(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for round := 0; round < 6; round++ {
		seed := r.Uint64()
		path := filepath.Join(t.TempDir(), "crash.umbra")
		cmd := testkit.Child("crash", fmt.Sprintf("UMBRA_CRASH_CHILD=%s,%d", path, seed))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		// The kill comes once the child has acknowledged operation
		// target, while it runs the next (-1: at once, maybe before the
		// store exists): a count, so that the operations covered do not
		// depend on the machine's speed.
		target := r.IntN(301) - 1
		require.NoError(t, cmd.Start())
		acked := -1
		reached, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
					acked, _ = strconv.Atoi(n)
					if acked == target {
						close(reached)
					}
				}
			}
		}()
		if target >= 0 {
			select {
			case <-reached:
			case <-done:
				t.Fatalf("round %d: the child ended after %d operations, before the kill at %d: %s", round, acked+1, target+1, stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("round %d: the child acknowledged %d operations in two minutes, not %d", round, acked+1, target+1)
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		<-done
		n := acked + 1 // operations acknowledged
		ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		if n == 0 && err != nil {
			continue // killed before the store was even created
		}
		require.NoError(t, err, "round %d: reopening after the kill (%d acknowledged)", round, n)
		match := -1
		for _, cand := range []int{n, n + 1} {
			md := crashModel(seed, cand)
			if len(md) != ix.Len() {
				continue
			}
			same := true
			for id, row := range md {
				got, err := ix.Vector(id)
				if err != nil || !floatsEqual(got, row.v) {
					same = false
					break
				}
				fields, ferr := ix.Meta(id)
				payload, perr := ix.Payload(id)
				require.NoError(t, ferr)
				require.NoError(t, perr)
				if !sameFields(fields, row.fields) || string(payload) != string(row.payload) {
					same = false
					break
				}
			}
			if same {
				match = cand
				break
			}
		}
		require.NoError(t, ix.Close())
		require.GreaterOrEqual(t, match, 0, "round %d (seed %d): the reopened store is neither the first %d operations nor the first %d", round, seed, n, n+1)
		t.Logf("round %d: killed after %d acknowledged operations; reopened with the first %d", round, n, match)
	}
}

func floatsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
