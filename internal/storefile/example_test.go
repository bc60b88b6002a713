package storefile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/umbravec/umbra/internal/storefile"
)

// The life of a store as an engine drives it: lock, open (base, then the
// log on top), log each change, checkpoint now and then.
func Example() {
	dir, _ := os.MkdirTemp("", "umbra-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index.umbra")

	unlock, err := storefile.Lock(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unlock()
	_ = storefile.RemoveTemps(storefile.OS, path) // what a crashed writer left

	// Open: the base, or a new empty one.
	snap, gen, err := storefile.ReadBase(path)
	if errors.Is(err, fs.ErrNotExist) {
		snap = &storefile.Snapshot{Dim: 3, Stride: 4, NextID: 1}
		gen, err = storefile.Checkpoint(storefile.OS, path, snap)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	n, torn, err := storefile.ReplayLog(storefile.LogPath(path), snap.Dim, gen, func(r storefile.Record) error {
		return nil // apply r to the index
	})
	fmt.Println("replayed", n, "torn tail:", torn, "error:", err)

	// Change it.
	log, err := storefile.OpenLog(storefile.OS, storefile.LogPath(path), snap.Dim, gen, storefile.SyncEveryCall)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = log.Append(storefile.Record{Op: storefile.OpAdd, IDs: []uint64{1}, Rows: []float32{0.5, 1, 2}})
	_ = log.Append(storefile.Record{Op: storefile.OpSetKey, IDs: []uint64{1}, Keys: []string{"doc-1"}})
	_ = log.Close()

	// Checkpoint: fold everything into a new base and start an empty log.
	snap = &storefile.Snapshot{Dim: 3, Stride: 4, NextID: 2, IDs: []uint64{1},
		Rows: []float32{0.5, 1, 2, 0}, Keys: map[uint64]string{1: "doc-1"}}
	gen, err = storefile.Checkpoint(storefile.OS, path, snap)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, _, err := storefile.ReadBase(path)
	fmt.Println(back.Len(), "row, key", back.Keys[1], "error:", err)
	// Output:
	// replayed 0 torn tail: false error: <nil>
	// 1 row, key doc-1 error: <nil>
}

func ExampleReadBase_damage() {
	dir, _ := os.MkdirTemp("", "umbra-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index.umbra")
	_, _ = storefile.WriteBase(storefile.OS, path, &storefile.Snapshot{Dim: 2, Stride: 4, IDs: []uint64{7}, Rows: []float32{1, 2, 0, 0}})

	b, _ := os.ReadFile(path)
	b[4096] ^= 1 // one bit of the first row
	_ = os.WriteFile(path, b, 0o644)

	_, _, err := storefile.ReadBase(path)
	var fe *storefile.FormatError
	if errors.As(err, &fe) {
		fmt.Println(fe.Section, errors.Is(err, storefile.ErrCorrupt))
	}
	// Output: rows true
}

func ExampleSyncInterval() {
	// Acknowledge appends at memory speed, fsync at most 10ms later: a
	// power loss may lose the last 10ms of acknowledged records, a crash
	// of the process loses nothing, and neither corrupts the store.
	fmt.Println(storefile.SyncInterval(10_000_000), storefile.SyncEveryCall)
	// Output: every 10ms every call
}
