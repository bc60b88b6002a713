package storefile

import "fmt"

// Checkpoint folds the log into a new base: it atomically writes s as the
// base at path, then atomically replaces path+".log" with an empty log for
// the new generation, and returns that generation. Both replacements go
// through fsys.
//
// A crash at any point leaves a store that opens to the same state: before
// the base's rename, the old base and its log; after it, the new base and
// either the old log (stale: its generation no longer matches, so
// ReplayLog ignores it, and the first Append after OpenLog replaces it) or
// the new, empty log.
//
// Close the Log of the old generation first, and OpenLog the new one after:
// an open Log keeps appending to the file the checkpoint replaced.
func Checkpoint(fsys FS, path string, s *Snapshot) (generation uint64, err error) {
	gen, err := WriteBase(fsys, path, s)
	if err != nil {
		return 0, err
	}
	if err := createLog(fsys, path+logSuffix, s.Dim, gen); err != nil {
		// The base is durable and the old log is stale, so the store is
		// whole; the next Log's first Append will finish the reset.
		return gen, fmt.Errorf("checkpoint %s: base written (generation %x), log not reset: %w", path, gen, err)
	}
	return gen, nil
}

// LogPath returns the path of the log of the store at path.
func LogPath(path string) string { return path + logSuffix }
