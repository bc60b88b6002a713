//go:build unix

package storefile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// The crash test's store: big enough rows that a checkpoint takes a while
// to write, so kills land inside WriteBase too.
const crashDim, crashStride = 61, 64

// model is what an engine would hold: rows by ID, tombstones, keys, and
// each row's meta and payload (non-empty ones only), the meta schema once
// any row has had meta.
type model struct {
	rows     map[uint64][]float32
	deleted  map[uint64]bool
	keys     map[uint64]string
	meta     map[uint64][]byte
	payloads map[uint64][]byte
	schema   []byte
	next     uint64
}

// crashSchema is the model's meta schema: opaque bytes, stored with the
// base from the first write that carried meta.
var crashSchema = []byte("crash schema v1")

func newModel() *model {
	return &model{rows: map[uint64][]float32{}, deleted: map[uint64]bool{}, keys: map[uint64]string{},
		meta: map[uint64][]byte{}, payloads: map[uint64][]byte{}}
}

// crashEntries returns n meta or payload entries: some empty, most short,
// now and then one of up to 256 KiB, so a kill can land inside the write
// of a large record.
func crashEntries(r *rand.Rand, n int) [][]byte {
	e := make([][]byte, n)
	for i := range e {
		switch k := r.IntN(10); {
		case k < 2:
		case k < 9:
			e[i] = randBytes(r, 1+r.IntN(200))
		default:
			e[i] = randBytes(r, 1+r.IntN(256<<10))
		}
	}
	return e
}

// opRecord is operation i of the sequence seed names; it depends only on
// seed, i and the state the previous operations built.
func opRecord(seed uint64, i int, m *model) Record {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	id := r.Uint64N(m.next + 1)
	switch k := r.IntN(14); {
	case k < 5 || k >= 10:
		n := 1 + r.IntN(3)
		rec := Record{Op: OpAdd, Rows: randFloats(r, n*crashDim)}
		for j := range n {
			rec.IDs = append(rec.IDs, m.next+uint64(j))
		}
		if k >= 10 {
			// A write carrying meta and payloads, an upsert of an existing
			// ID or an add of new ones, some with keys.
			rec.Op = OpWrite
			if k >= 12 {
				rec.Upsert, rec.IDs, rec.Rows = true, []uint64{id}, randFloats(r, crashDim)
				n = 1
			}
			if r.IntN(3) == 0 {
				for j := range n {
					rec.Keys = append(rec.Keys, fmt.Sprintf("op%d-w%d", i, j))
				}
			}
			switch r.IntN(3) {
			case 0:
				rec.Meta = crashEntries(r, n)
			case 1:
				rec.Payloads = crashEntries(r, n)
			default:
				rec.Meta, rec.Payloads = crashEntries(r, n), crashEntries(r, n)
			}
		}
		return rec
	case k < 6:
		return Record{Op: OpUpsert, IDs: []uint64{id}, Rows: randFloats(r, crashDim)}
	case k < 7:
		return Record{Op: OpUpsertKeys, IDs: []uint64{id}, Rows: randFloats(r, crashDim), Keys: []string{fmt.Sprintf("op%d", i)}}
	case k < 9:
		return Record{Op: OpDelete, IDs: []uint64{id}}
	default:
		return Record{Op: OpSetKey, IDs: []uint64{id}, Keys: []string{fmt.Sprintf("op%d-id%d", i, id)}}
	}
}

func (m *model) apply(rec Record) {
	for j, id := range rec.IDs {
		switch rec.Op {
		case OpAdd, OpUpsert, OpUpsertKeys, OpWrite:
			m.rows[id] = rec.Rows[j*crashDim : (j+1)*crashDim]
			delete(m.deleted, id)
			m.next = max(m.next, id+1)
			if len(rec.Keys) > 0 {
				m.keys[id] = rec.Keys[j]
			}
			// A write replaces a row's meta and payload (an empty entry
			// clears it); one without them leaves them as they were.
			for _, part := range []struct {
				entries [][]byte
				into    map[uint64][]byte
			}{{rec.Meta, m.meta}, {rec.Payloads, m.payloads}} {
				if len(part.entries) == 0 {
					continue
				}
				if len(part.entries[j]) > 0 {
					part.into[id] = part.entries[j]
				} else {
					delete(part.into, id)
				}
			}
			if len(rec.Meta) > 0 {
				m.schema = crashSchema
			}
		case OpDelete:
			if _, ok := m.rows[id]; ok {
				m.deleted[id] = true
			}
		case OpSetKey:
			m.keys[id] = rec.Keys[j]
		}
	}
}

func modelAfter(seed uint64, n int) *model {
	m := newModel()
	for i := range n {
		m.apply(opRecord(seed, i, m))
	}
	return m
}

func (m *model) snapshot() *Snapshot {
	s := &Snapshot{Dim: crashDim, Stride: crashStride, Metric: 1, NextID: m.next, Keys: m.keys, Schema: m.schema}
	for id := range m.rows {
		s.IDs = append(s.IDs, id)
	}
	slices.SortFunc(s.IDs, cmp.Compare)
	s.Rows = make([]float32, len(s.IDs)*crashStride)
	s.Deleted = make([]uint64, (len(s.IDs)+63)/64)
	s.Meta, s.Payloads = make([][]byte, len(s.IDs)), make([][]byte, len(s.IDs))
	for i, id := range s.IDs {
		copy(s.Rows[i*crashStride:], m.rows[id])
		if m.deleted[id] {
			s.Deleted[i/64] |= 1 << (i % 64)
		}
		s.Meta[i], s.Payloads[i] = m.meta[id], m.payloads[id]
	}
	return s
}

// recoverModel is what an engine's Open does: the base, then the log.
func recoverModel(path string) (m *model, gen uint64, err error) {
	s, gen, err := ReadBase(path)
	if err != nil {
		return nil, 0, err
	}
	m = newModel()
	m.next = s.NextID
	for i, id := range s.IDs {
		m.rows[id] = s.Rows[i*s.Stride : i*s.Stride+s.Dim]
		if s.IsDeleted(i) {
			m.deleted[id] = true
		}
	}
	for id, k := range s.Keys {
		m.keys[id] = k
	}
	m.schema = s.Schema
	for _, part := range []struct {
		entries [][]byte
		into    map[uint64][]byte
	}{{s.Meta, m.meta}, {s.Payloads, m.payloads}} {
		for i, b := range part.entries {
			if len(b) > 0 {
				part.into[s.IDs[i]] = b
			}
		}
	}
	_, _, err = ReplayLog(LogPath(path), s.Dim, gen, func(rec Record) error {
		m.apply(rec)
		return nil
	})
	return m, gen, err
}

func (m *model) equal(o *model) bool {
	if m.next != o.next || len(m.rows) != len(o.rows) || len(m.deleted) != len(o.deleted) || len(m.keys) != len(o.keys) ||
		!bytes.Equal(m.schema, o.schema) || !maps.EqualFunc(m.meta, o.meta, bytes.Equal) || !maps.EqualFunc(m.payloads, o.payloads, bytes.Equal) {
		return false
	}
	for id, row := range m.rows {
		if !bytes.Equal(floatBytes(row), floatBytes(o.rows[id])) {
			return false
		}
	}
	for id := range m.deleted {
		if !o.deleted[id] {
			return false
		}
	}
	for id, k := range m.keys {
		if ok, has := o.keys[id]; !has || ok != k {
			return false
		}
	}
	return true
}

// childRoles are what this test binary does when a test starts it again.
var childRoles = map[string]func() int{"lock": lockChild, "crash": crashChildRole}

// lockChild tries to lock the store UMBRA_STOREFILE_PATH names and says
// what came of it.
func lockChild() int {
	if _, err := Lock(os.Getenv("UMBRA_STOREFILE_PATH")); err != nil {
		fmt.Printf("%v\n", err)
		if errors.Is(err, ErrLocked) {
			return 0
		}
		return 1
	}
	fmt.Println("locked")
	return 0
}

// crashChildRole runs crashChild on the store, seed and start its
// environment names.
func crashChildRole() int {
	seed, _ := strconv.ParseUint(os.Getenv("UMBRA_STOREFILE_SEED"), 10, 64)
	start, _ := strconv.Atoi(os.Getenv("UMBRA_STOREFILE_START"))
	if err := crashChild(os.Getenv("UMBRA_STOREFILE_PATH"), seed, start); err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	return 0
}

// crashChild appends and checkpoints until killed, printing each operation
// once it is acknowledged.
func crashChild(path string, seed uint64, start int) error {
	if _, err := Lock(path); err != nil {
		return err
	}
	if err := RemoveTemps(OS, path); err != nil {
		return err
	}
	m, gen, err := recoverModel(path)
	if errors.Is(err, fs.ErrNotExist) && start == 0 {
		m = newModel()
	} else if err != nil {
		return err
	}
	if !m.equal(modelAfter(seed, start)) {
		return fmt.Errorf("recovered state is not the state after %d operations", start)
	}
	fmt.Println("start")
	if gen == 0 {
		if gen, err = WriteBase(OS, path, m.snapshot()); err != nil {
			return err
		}
	}
	log, err := OpenLog(OS, LogPath(path), crashDim, gen, SyncEveryCall)
	if err != nil {
		return err
	}
	for i := start; i < start+100000; i++ {
		rec := opRecord(seed, i, m)
		if err := log.Append(rec); err != nil {
			return err
		}
		m.apply(rec)
		fmt.Printf("ack %d\n", i)
		if i%5 == 4 {
			fmt.Println("ckpt")
			if err := log.Close(); err != nil {
				return err
			}
			if gen, err = Checkpoint(OS, path, m.snapshot()); err != nil {
				return err
			}
			if log, err = OpenLog(OS, LogPath(path), crashDim, gen, SyncEveryCall); err != nil {
				return err
			}
		}
	}
	return log.Close()
}

// TestCrashRecoversEveryAcknowledgedOperation kills a writer with SIGKILL at
// random moments (mid-append, mid-checkpoint, before the first base exists)
// and checks that what reopens is exactly the state after a prefix of the
// operations that includes every acknowledged one: at most the one in
// flight is extra, nothing is mixed, nothing errors.
func TestCrashRecoversEveryAcknowledgedOperation(t *testing.T) {
	r := testkit.Rand(t)
	seed := r.Uint64()
	path := filepath.Join(t.TempDir(), "crash.umbra")
	acked := 0 // operations known durable: acknowledged or recovered
	kinds := map[string]int{}
	seen := map[string]int{}
	deadline := time.Now().Add(6 * time.Second)
	for round := 0; round < 20 && time.Now().Before(deadline); round++ {
		var trigger string
		switch k := r.IntN(10); {
		case k < 1:
			trigger = "start"
		case k < 5:
			trigger = "ckpt"
		default:
			trigger = fmt.Sprintf("ack %d", acked+r.IntN(12))
		}
		kinds[strings.Fields(trigger)[0]]++
		delay := time.Duration(r.IntN(1500)) * time.Microsecond

		cmd := testkit.Child("crash", "UMBRA_STOREFILE_PATH="+path,
			"UMBRA_STOREFILE_SEED="+strconv.FormatUint(seed, 10), "UMBRA_STOREFILE_START="+strconv.Itoa(acked))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lastAck := -1
		killed := false
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			if n, ok := strings.CutPrefix(line, "ack "); ok {
				lastAck, _ = strconv.Atoi(n)
			}
			if !killed && (line == trigger || strings.HasPrefix(line, "error")) {
				time.Sleep(delay)
				require.NoError(t, cmd.Process.Kill())
				killed = true
			}
		}
		_ = cmd.Wait()
		for _, l := range lines {
			require.False(t, strings.HasPrefix(l, "error"), "child failed: %s\n%s", l, stderr.String())
		}
		require.True(t, killed, "child ended without being killed:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
		if lastAck >= 0 {
			require.Equal(t, acked, lastAck+1-countAcks(lines), "child restarted where the last round recovered")
			acked = lastAck + 1
		}

		// What the kill left, for the log: temporary files (killed inside
		// an atomic write) and a stale log (killed between a checkpoint's
		// base rename and its log reset).
		if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"+tempInfix+"*")); len(temps) > 0 {
			seen["temporary file"]++
		}
		if raw, err := os.ReadFile(path); err == nil && len(raw) >= 12 && binary.LittleEndian.Uint32(raw[8:]) == baseVersion2 {
			seen["version-2 base"]++
		}
		if _, gen, err := ReadBase(path); err == nil {
			if _, _, err := ReplayLog(LogPath(path), crashDim, gen^1, nil); err == nil {
				if raw, err := os.ReadFile(LogPath(path)); err == nil && len(raw) >= logHeaderLen &&
					binary.LittleEndian.Uint64(raw[16:]) != gen {
					seen["stale log"]++
				}
			}
		}

		m, _, err := recoverModel(path)
		if errors.Is(err, fs.ErrNotExist) {
			require.Zero(t, acked, "base missing after operations were acknowledged")
			continue
		}
		require.NoError(t, err, "round %d: a crash must leave a store that opens", round)
		// At most the operation in flight may be there too.
		switch {
		case m.equal(modelAfter(seed, acked+1)):
			seen["in-flight operation durable"]++
			acked++
		case m.equal(modelAfter(seed, acked)):
		default:
			t.Fatalf("round %d: recovered state is neither the state after %d acknowledged operations nor after %d",
				round, acked, acked+1)
		}
	}
	t.Logf("kills by trigger %v; after a kill: %v; %d operations recovered at the end", kinds, seen, acked)
	require.Positive(t, acked)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Logf("files after the last kill: %v", names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			assert.True(t, strings.HasPrefix(n, tempPrefix(path)) || strings.HasPrefix(n, tempPrefix(LogPath(path))),
				"unexpected file %s", n)
		}
	}
}

func countAcks(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ack ") {
			n++
		}
	}
	return n
}

func TestLockExcludesSecondWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	unlock, err := Lock(path)
	require.NoError(t, err)

	// Same process, second descriptor.
	_, err = Lock(path)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), lockPath(path))

	// Another process.
	child := func() string {
		out := testkit.Run(t, testkit.Child("lock", "UMBRA_STOREFILE_PATH="+path))
		require.Zero(t, out.Code, "%+v", out)
		return strings.TrimSpace(out.Stdout)
	}
	out := child()
	assert.Contains(t, out, ErrLocked.Error())
	assert.Contains(t, out, lockPath(path))

	require.NoError(t, unlock())
	require.NoError(t, unlock(), "unlock twice")
	assert.Equal(t, "locked", child(), "free once unlocked")
	unlock, err = Lock(path)
	require.NoError(t, err, "a dead holder leaves no lock behind")
	require.NoError(t, unlock())
}
