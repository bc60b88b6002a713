package storefile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

const (
	logSuffix  = ".log"
	lockSuffix = ".lock"

	logMagic     = "UMBRALOG"
	logVersion   = 2 // the version new logs are written in
	logHeaderLen = 32

	// frameLen is a version-2 frame header: length u32, synced u64,
	// position tag u64, header CRC u32, payload CRC u32.
	frameLen = 28
	// frameLenV1 is a version-1 frame header: length u32, synced u64,
	// header CRC u32, payload CRC u32. Version 1 is still read, and a
	// Log opened on a version-1 log that holds records keeps writing it.
	frameLenV1 = 20
)

// SyncPolicy says when Append's data reaches stable storage. The zero
// value is SyncEveryCall.
type SyncPolicy struct {
	interval time.Duration
}

// SyncEveryCall fsyncs the log inside every Append: when Append returns
// nil the record survives a power loss. Costs one fsync per call.
var SyncEveryCall = SyncPolicy{}

// SyncInterval acknowledges an Append once the record is written to the
// operating system and fsyncs at most d later (a timer armed by the first
// unsynced Append). A process crash loses nothing acknowledged (the kernel
// has the bytes); a power loss or kernel crash may lose the records
// acknowledged in the last d, never more, and never corrupts the store:
// replay stops at the first record that did not survive. d <= 0 means
// SyncEveryCall.
func SyncInterval(d time.Duration) SyncPolicy {
	if d < 0 {
		d = 0
	}
	return SyncPolicy{interval: d}
}

func (p SyncPolicy) String() string {
	if p.interval == 0 {
		return "every call"
	}
	return "every " + p.interval.String()
}

// Log appends records to a store's log file. Its methods are safe for
// concurrent use. A Log must be closed; the caller should hold the store's
// Lock for as long as it is open.
type Log struct {
	path    string
	dim     int
	gen     uint64
	version uint32 // of the file: frames are written in its layout
	policy  SyncPolicy

	mu     sync.Mutex
	f      *os.File
	off    int64 // end of the last record written
	synced int64 // bytes known durable: fsync completed after they were written
	timer  *time.Timer
	err    error // sticky: once set, the Log refuses appends
	buf    []byte
	fsys   FS
	// What the first Append does before its record, so that opening a
	// log changes no file: create (there is none, or the one there is
	// stale or empty of an old version: f is nil) or cut a torn tail
	// (truncate: at off).
	create, truncate bool
}

// OpenLog opens the log at path for appending records of dimension dim
// after the base of the given generation. Opening changes no file: what a
// log needs before its first record is done by the first Append. A log
// that does not exist is created then (atomically, with its header). A
// log of another generation is stale (a checkpoint wrote a newer base and
// crashed before resetting the log): its records are all in the base, and
// the first Append replaces it by an empty one. A torn tail (see
// ReplayLog) is cut off before the first record is written; a corrupt log
// is an error. So a store opened for a write that is then refused is left
// byte for byte as it was, with no log made where there was none. The log
// is created and replaced through fsys (WriteFile); its appends go to the
// file directly.
//
// A log of format version 1 that holds records is appended to in version
// 1, so its records stay readable (version 1 frames carry no position, see
// FORMAT.md); one that holds none is replaced by an empty version-2 log at
// the first Append. The next checkpoint starts a version-2 log either way.
//
// Replay the log with ReplayLog before opening it: OpenLog does not hand
// records out.
func OpenLog(fsys FS, path string, dim int, generation uint64, policy SyncPolicy) (*Log, error) {
	if dim < 1 || uint64(dim) > math.MaxUint32 || generation == 0 {
		return nil, fmt.Errorf("%w: open log %s: dim %d, generation %d", ErrInvalid, path, dim, generation)
	}
	fresh := &Log{path: path, dim: dim, gen: generation, version: logVersion, policy: policy, fsys: fsys,
		create: true, off: logHeaderLen, synced: logHeaderLen}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open log: %w", err)
	}
	res, err := scanLog(f, st.Size(), path, dim, generation, nil)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if res.stale || (res.version < logVersion && res.records == 0) {
		// Stale, or an old version with nothing in it to keep: the first
		// Append starts a current, empty log.
		_ = f.Close()
		return fresh, nil
	}
	return &Log{path: path, dim: dim, gen: generation, version: res.version, policy: policy, fsys: fsys,
		f: f, off: res.end, synced: res.end, truncate: res.torn}, nil
}

// prepare makes the file ready for the first record: creates (or
// replaces) it, or cuts its torn tail, durably. The caller holds mu.
func (l *Log) prepare() error {
	if l.create {
		if err := createLog(l.fsys, l.path, l.dim, l.gen); err != nil {
			return err
		}
		f, err := os.OpenFile(l.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open log: %w", err)
		}
		l.f, l.create = f, false
		return nil
	}
	if l.truncate {
		// Cut what a crash left half-written, durably, so new records
		// follow the last good one instead of garbage.
		if err := l.f.Truncate(l.off); err != nil {
			return fmt.Errorf("log %s: truncate torn tail at %d: %w", l.path, l.off, err)
		}
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("%w: %s: fsync after truncating its torn tail failed: %v", ErrClosed, l.path, err)
		}
		l.truncate = false
	}
	return nil
}

// createLog atomically replaces path with an empty log for generation.
func createLog(fsys FS, path string, dim int, generation uint64) error {
	return WriteFile(fsys, path, 0o644, func(w *bufio.Writer) error {
		_, err := w.Write(encodeLogHeader(dim, generation))
		return err
	})
}

func encodeLogHeader(dim int, generation uint64) []byte {
	h := make([]byte, 0, logHeaderLen)
	h = append(h, logMagic...)
	h = binary.LittleEndian.AppendUint32(h, logVersion)
	h = binary.LittleEndian.AppendUint32(h, uint32(dim))
	h = binary.LittleEndian.AppendUint64(h, generation)
	h = binary.LittleEndian.AppendUint32(h, 0)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// Generation returns the base generation this log extends.
func (l *Log) Generation() uint64 { return l.gen }

// Size returns the log's length in bytes, header included: a measure of
// how much a checkpoint would fold in.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.off
}

// Append writes rec as one record. Under SyncEveryCall it returns after the
// record is durable; under SyncInterval after it is written to the
// operating system. A failed write or fsync makes the Log refuse every
// later Append (ErrClosed): the file's tail is then unknown, and a retried
// fsync can report success for pages the kernel already dropped. Reopen
// the log to continue; replay shows what survived.
func (l *Log) Append(rec Record) error {
	if err := rec.validate(l.dim); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.create || l.truncate {
		if err := l.prepare(); err != nil {
			if errors.Is(err, ErrClosed) {
				l.err = err
			}
			return err
		}
	}
	b, mid, rows := frame(l.buf[:0], &rec, l.version, l.gen, l.off, l.synced)
	if cap(b) <= 1<<20 {
		l.buf = b[:0]
	} else {
		l.buf = nil // one huge record should not pin its buffer
	}
	at := l.off
	for _, piece := range [][]byte{b[:mid], rows, b[mid:]} {
		if len(piece) == 0 {
			continue
		}
		if _, err := l.f.WriteAt(piece, at); err != nil {
			// Take back what may have been written; a reader would treat
			// it as a torn tail anyway, as nothing valid follows it.
			_ = l.f.Truncate(l.off)
			l.err = fmt.Errorf("%w: %s: write failed: %v", ErrClosed, l.path, err)
			return l.err
		}
		at += int64(len(piece))
	}
	l.off = at
	if l.policy.interval == 0 {
		return l.syncLocked()
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(l.policy.interval, l.timerSync)
	}
	return nil
}

func (l *Log) timerSync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.err == nil {
		_ = l.syncLocked() // sticky in l.err; the next Append reports it
	}
}

func (l *Log) syncLocked() error {
	if l.synced == l.off || l.f == nil {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("%w: %s: fsync failed, records since byte %d may be lost: %v", ErrClosed, l.path, l.synced, err)
		return l.err
	}
	l.synced = l.off
	return nil
}

// Sync makes every record appended so far durable, whatever the policy.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return l.syncLocked()
}

// Close syncs and closes the log. Closing twice returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if l.err == nil { // never written: no file was made
			l.err = fmt.Errorf("%w: %s", ErrClosed, l.path)
		}
		return nil
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	var err error
	if l.err == nil {
		err = l.syncLocked()
	} else {
		err = l.err
	}
	if cerr := l.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close log %s: %w", l.path, cerr)
	}
	l.f = nil
	if l.err == nil {
		l.err = fmt.Errorf("%w: %s", ErrClosed, l.path)
	}
	return err
}

// appendFrame appends rec, validated, as one frame of the given log
// version that will start at byte pos of a log of generation gen: payload
// length, the offset synced up to when it was written, (version 2) the
// position tag pos XOR gen, a CRC-32C of those bytes, a CRC-32C of the
// payload, then the payload.
func appendFrame(dst []byte, rec *Record, version uint32, gen uint64, pos, synced int64) []byte {
	buf, mid, rows := frame(dst, rec, version, gen, pos, synced)
	if rows == nil {
		return buf
	}
	tail := slices.Clone(buf[mid:])
	return append(append(buf[:mid], rows...), tail...)
}

// frame encodes rec's frame, for byte pos of a log of version and
// generation gen, after dst as up to three pieces that follow each other
// in the file: buf[len(dst):mid], rows, buf[mid:]. On a little-endian
// host rows is the record's rows as they lie in memory, which is their
// encoding, so that a write's megabytes of rows are written from the
// caller's memory rather than copied into a frame first; elsewhere rows is
// nil and buf holds them. The payload's checksum covers the pieces in
// turn.
func frame(dst []byte, rec *Record, version uint32, gen uint64, pos, synced int64) (buf []byte, mid int, rows []byte) {
	fl := frameLenOf(version)
	start := len(dst)
	size := rec.payloadSize()
	inline := !littleEndianHost
	if inline {
		dst = slices.Grow(dst, fl+int(size))
	} else {
		dst = slices.Grow(dst, fl+int(size)-4*len(rec.Rows))
	}
	dst = dst[:start+fl]
	dst = rec.appendPayloadHead(dst)
	if inline {
		dst = appendFloatsLE(dst, rec.Rows)
	} else {
		rows = floatBytes(rec.Rows)
	}
	mid = len(dst)
	dst = rec.appendPayloadTail(dst)
	b := dst[start:]
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(size))
	le.PutUint64(b[4:], uint64(synced))
	if version >= 2 {
		le.PutUint64(b[12:], positionTag(pos, gen))
	}
	le.PutUint32(b[fl-8:], crc32.Checksum(b[:fl-8], castagnoli))
	crc := crc32.Update(0, castagnoli, dst[start+fl:mid])
	crc = crc32.Update(crc, castagnoli, rows)
	crc = crc32.Update(crc, castagnoli, dst[mid:])
	le.PutUint32(b[fl-4:], crc)
	return dst, mid, rows
}

// frameLenOf is the length of a frame header in a log of version.
func frameLenOf(version uint32) int {
	if version == 1 {
		return frameLenV1
	}
	return frameLen
}

// positionTag is what a version-2 frame starting at byte pos of a log of
// generation gen carries: it binds the frame to that position and that
// log, so a whole frame copied or moved elsewhere, or left by another
// generation's log, is recognised though its checksums hold.
func positionTag(pos int64, gen uint64) uint64 { return uint64(pos) ^ gen }
