// Package storefile owns the bytes a vector index leaves on disk: a base file
// (one checkpoint of the whole index, its rows laid out exactly as the device
// buffer wants them), an append-only log of the changes made since that
// checkpoint, and a lock file that keeps a second process from writing the
// same store.
//
// It knows nothing about searching. The engine hands it a [Snapshot] to
// checkpoint and [Record]s to log, and gets the same values back after a
// restart or a crash; what the values mean (metric codes, how an upsert
// replaces a row, which IDs keys point at, what a row's metadata and
// payload bytes hold) stays the engine's business.
//
// A store at path P is three files:
//
//	P       base file, replaced atomically by [WriteBase] / [Checkpoint]
//	P.log   log of records after the base, see [OpenLog] and [ReplayLog]
//	P.lock  lock file, see [Lock]
//
// FORMAT.md in this directory is the byte-level specification, with the
// durability promise of each [SyncPolicy] and what a crash at every step
// leaves behind. Readers never trust a size they read: every length is checked
// against the bytes actually in the file before anything is allocated, every
// section carries a CRC-32C, and every failure is a *[FormatError] naming the
// file section and wrapping one of the sentinel errors ([ErrMagic],
// [ErrVersion], [ErrTruncated], [ErrCorrupt], [ErrUnsupported]).
package storefile
