package storefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
)

// ReplayLog reads the log at path and calls fn with each record, in order.
// It returns how many records it handed to fn and whether it stopped at a
// torn tail.
//
// A missing log, or a stale one (its header names another base generation:
// a checkpoint crashed between writing the base and resetting the log), has
// no records for this base: (0, false, nil). But a version-2 log whose
// header names another generation while its frames are tagged for this
// one had its header overwritten by an older log's: ErrCorrupt.
//
// A torn tail is the end of the log that a crash left half-written: a frame
// cut short, or a record whose checksum fails, with no record after it that
// was written after the damaged one had been made durable. Every frame
// carries the offset up to which the log had been fsynced when it was
// written; a valid frame anywhere after a bad one, written where it lies
// (its position tag, below), that claims the bad one's bytes were already
// synced proves the damage is not a crash, and ReplayLog
// returns ErrCorrupt naming the record. Replay stops at a torn tail and
// reports it with err == nil; OpenLog cuts it off before appending.
//
// Every frame of a version-2 log also carries its own byte offset XOR the
// log's generation, under its header CRC. A frame whose checksums hold but
// that carries another position — a record duplicated over another, records
// reordered, a frame of an older generation's log — was put there by a
// misdirected or duplicated write, never by a crash: ErrCorrupt naming the
// record, its offset, and the position expected and found. (Version-1 logs
// are still read, without this check.)
//
// An error from fn stops the replay and is returned as is.
func ReplayLog(path string, dim int, generation uint64, fn func(Record) error) (records int, tornTail bool, err error) {
	if dim < 1 || uint64(dim) > math.MaxUint32 {
		return 0, false, fmt.Errorf("%w: replay log %s: dim %d", ErrInvalid, path, dim)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("replay log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("replay log: %w", err)
	}
	if fn == nil {
		fn = func(Record) error { return nil }
	}
	res, err := scanLog(f, st.Size(), path, dim, generation, fn)
	return res.records, res.torn, err
}

type scanResult struct {
	version uint32 // of the log's format
	records int
	end     int64 // end of the last good record: where the next append goes
	torn    bool
	stale   bool
}

// scanLog validates the log in r and hands each record to fn (nil: only
// validate).
func scanLog(r io.ReaderAt, size int64, name string, dim int, generation uint64, fn func(Record) error) (scanResult, error) {
	var res scanResult
	bad := func(sentinel error, format string, args ...any) error {
		return formatErr(name, "log header", 0, sentinel, format, args...)
	}
	// The header is written atomically (temporary file and rename) with
	// the log's creation, so any damage to it is corruption, never a crash.
	h := make([]byte, min(size, logHeaderLen))
	if _, err := r.ReadAt(h, 0); err != nil && !(errors.Is(err, io.EOF) && len(h) > 0) {
		return res, bad(ErrTruncated, "reading header: %v", err)
	}
	if m := min(len(h), len(logMagic)); !bytes.Equal(h[:m], []byte(logMagic)[:m]) {
		return res, bad(ErrMagic, "file starts with %q, want %q", h[:m], logMagic)
	}
	if len(h) < 12 {
		return res, bad(ErrTruncated, "file is %d bytes, shorter than the %d-byte header", size, logHeaderLen)
	}
	le := binary.LittleEndian
	res.version = le.Uint32(h[8:])
	if res.version < 1 || res.version > logVersion {
		return res, bad(ErrVersion, "format version %d, this reader knows 1 to %d", res.version, logVersion)
	}
	if len(h) < logHeaderLen {
		return res, bad(ErrTruncated, "file is %d bytes, shorter than the %d-byte header", size, logHeaderLen)
	}
	if got, want := crc32.Checksum(h[:logHeaderLen-4], castagnoli), le.Uint32(h[logHeaderLen-4:]); got != want {
		return res, bad(ErrCorrupt, "header CRC-32C is %08x, stored %08x", got, want)
	}
	if le.Uint32(h[24:]) != 0 {
		return res, bad(ErrCorrupt, "reserved field is %d, want 0", le.Uint32(h[24:]))
	}
	if g := le.Uint64(h[16:]); g != generation {
		// Stale: a checkpoint crashed before resetting the log, so all its
		// frames are of its own, older generation. A whole frame tagged
		// for this base's generation in it means the header is what is
		// old (an older log's first block written over this log's), and
		// ignoring the log would drop acknowledged records.
		if res.version >= 2 {
			if at, ok := laterSyncedFrame(r, size, logHeaderLen-1, res.version, generation); ok {
				return res, bad(ErrCorrupt, "header names generation %x, yet the record at byte %d was written in this log for generation %x", g, at, generation)
			}
		}
		res.stale, res.end = true, logHeaderLen
		return res, nil
	}
	if d := le.Uint32(h[12:]); uint64(d) != uint64(dim) {
		return res, bad(ErrCorrupt, "log of dim %d extends a base of dim %d", d, dim)
	}

	pos := int64(logHeaderLen)
	fl := int64(frameLenOf(res.version))
	var buf []byte
	for pos < size {
		payload, why := readFrame(r, size, pos, res.version, &buf)
		if why != "" {
			if later, ok := laterSyncedFrame(r, size, pos, res.version, generation); ok {
				return res, formatErr(name, fmt.Sprintf("log record %d", res.records), pos, ErrCorrupt,
					"%s, yet the record at byte %d was written after this one had been synced", why, later)
			}
			res.end, res.torn = pos, true
			return res, nil
		}
		sect := fmt.Sprintf("log record %d", res.records)
		// A whole frame, both checksums holding, written for another
		// position or log: a crash writes each frame where it belongs, so
		// this is a misdirected or duplicated write, never a torn tail.
		if res.version >= 2 {
			if err := checkPosition(buf, pos, size, generation); err != "" {
				return res, formatErr(name, sect, pos, ErrCorrupt, "%s", err)
			}
		}
		if synced := int64(le.Uint64(buf[4:])); synced > pos {
			return res, formatErr(name, sect, pos, ErrCorrupt, "claims %d bytes synced before its own start", synced)
		}
		// A frame whose checksums hold but whose payload does not decode
		// was written that way: corruption, never a crash.
		rec, err := decodePayload(payload, dim)
		if err != nil {
			return res, formatErr(name, sect, pos, ErrCorrupt, "%v", err)
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return res, err
			}
		}
		res.records++
		pos += fl + int64(len(payload))
	}
	res.end = pos
	return res, nil
}

// checkPosition checks the position tag of the version-2 frame header in
// hdr, found at byte pos of a log of size bytes and generation gen, and
// says what is wrong ("" if nothing).
func checkPosition(hdr []byte, pos, size int64, gen uint64) string {
	want, got := positionTag(pos, gen), binary.LittleEndian.Uint64(hdr[12:])
	if got == want {
		return ""
	}
	if claimed := got ^ gen; claimed >= logHeaderLen && claimed < uint64(size) {
		return fmt.Sprintf("a whole frame written for byte %d lies at byte %d: a record duplicated or moved "+
			"(position tag %016x, expected %016x)", claimed, pos, got, want)
	}
	return fmt.Sprintf("a whole frame not written for this position of this log: one from another log or an older generation "+
		"(position tag %016x, expected %016x for byte %d of generation %x)", got, want, pos, gen)
}

// readFrame reads the frame of a log of version at pos into *buf (header,
// then payload) and returns its payload, or a reason it is not a whole
// frame whose checksums hold. It allocates at most the bytes between pos
// and size.
func readFrame(r io.ReaderAt, size, pos int64, version uint32, buf *[]byte) ([]byte, string) {
	fl := frameLenOf(version)
	if size-pos < int64(fl) {
		return nil, fmt.Sprintf("frame header cut short (%d of %d bytes)", size-pos, fl)
	}
	var hdrBuf [frameLen]byte
	hdr := hdrBuf[:fl]
	if _, err := r.ReadAt(hdr, pos); err != nil {
		return nil, fmt.Sprintf("reading frame header: %v", err)
	}
	le := binary.LittleEndian
	if got, want := crc32.Checksum(hdr[:fl-8], castagnoli), le.Uint32(hdr[fl-8:]); got != want {
		return nil, fmt.Sprintf("frame header CRC-32C is %08x, stored %08x", got, want)
	}
	n := int64(le.Uint32(hdr[0:]))
	if n > size-pos-int64(fl) {
		return nil, fmt.Sprintf("payload of %d bytes cut short (%d in the file)", n, size-pos-int64(fl))
	}
	if int64(cap(*buf)) < int64(fl)+n {
		*buf = make([]byte, int64(fl)+n)
	}
	b := (*buf)[:int64(fl)+n]
	copy(b, hdr)
	if _, err := r.ReadAt(b[fl:], pos+int64(fl)); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Sprintf("reading payload: %v", err)
	}
	if got, want := crc32.Checksum(b[fl:], castagnoli), le.Uint32(hdr[fl-4:]); got != want {
		return nil, fmt.Sprintf("payload CRC-32C is %08x, stored %08x", got, want)
	}
	return b[fl:], ""
}

// laterSyncedFrame looks, at every byte offset after a bad frame at bad, for
// a valid frame that says it was written when the log was already durable
// past bad. Only damage to synced bytes can produce one; a crash cannot. In
// a version-2 log a frame vouches only where its position tag says it was
// written: a frame copied elsewhere, or one that happens to lie inside a
// payload (a key's bytes are the caller's), vouches for nothing.
func laterSyncedFrame(r io.ReaderAt, size, bad int64, version uint32, gen uint64) (int64, bool) {
	const window = 1 << 16
	fl := frameLenOf(version)
	win := make([]byte, window+fl)
	var payload []byte
	le := binary.LittleEndian
	for start := bad + 1; start+int64(fl) <= size; start += window {
		n, err := r.ReadAt(win[:min(int64(len(win)), size-start)], start)
		if n < fl && err != nil {
			return 0, false
		}
		for i := 0; i+fl <= n && i < window; i++ {
			h := win[i : i+fl]
			if crc32.Checksum(h[:fl-8], castagnoli) != le.Uint32(h[fl-8:]) {
				continue
			}
			pos := start + int64(i)
			if version >= 2 && le.Uint64(h[12:]) != positionTag(pos, gen) {
				continue
			}
			if synced := int64(le.Uint64(h[4:])); synced <= bad || synced > pos {
				continue
			}
			if _, why := readFrame(r, size, pos, version, &payload); why == "" {
				return pos, true
			}
		}
	}
	return 0, false
}
