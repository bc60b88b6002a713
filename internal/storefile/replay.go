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
// no records for this base: (0, false, nil).
//
// A torn tail is the end of the log that a crash left half-written: a frame
// cut short, or a record whose checksum fails, with no record after it that
// was written after the damaged one had been made durable. Every frame
// carries the offset up to which the log had been fsynced when it was
// written; a valid frame anywhere after a bad one that claims the bad one's
// bytes were already synced proves the damage is not a crash, and ReplayLog
// returns ErrCorrupt naming the record. Replay stops at a torn tail and
// reports it with err == nil; OpenLog cuts it off before appending.
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
		return 0, false, fmt.Errorf("storefile: replay log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("storefile: replay log: %w", err)
	}
	if fn == nil {
		fn = func(Record) error { return nil }
	}
	res, err := scanLog(f, st.Size(), path, dim, generation, fn)
	return res.records, res.torn, err
}

type scanResult struct {
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
	if v := le.Uint32(h[8:]); v != logVersion {
		return res, bad(ErrVersion, "format version %d, this reader knows %d", v, logVersion)
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
		res.stale, res.end = true, logHeaderLen
		return res, nil
	}
	if d := le.Uint32(h[12:]); uint64(d) != uint64(dim) {
		return res, bad(ErrCorrupt, "log of dim %d extends a base of dim %d", d, dim)
	}

	pos := int64(logHeaderLen)
	var buf []byte
	for pos < size {
		payload, why := readFrame(r, size, pos, &buf)
		if why != "" {
			if later, ok := laterSyncedFrame(r, size, pos); ok {
				return res, formatErr(name, fmt.Sprintf("log record %d", res.records), pos, ErrCorrupt,
					"%s, yet the record at byte %d was written after this one had been synced", why, later)
			}
			res.end, res.torn = pos, true
			return res, nil
		}
		sect := fmt.Sprintf("log record %d", res.records)
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
		pos += frameLen + int64(len(payload))
	}
	res.end = pos
	return res, nil
}

// readFrame reads the frame at pos into *buf and returns its payload, or a
// reason it is not a whole, valid frame. It allocates at most the bytes
// between pos and size.
func readFrame(r io.ReaderAt, size, pos int64, buf *[]byte) ([]byte, string) {
	if size-pos < frameLen {
		return nil, fmt.Sprintf("frame header cut short (%d of %d bytes)", size-pos, frameLen)
	}
	var hdr [frameLen]byte
	if _, err := r.ReadAt(hdr[:], pos); err != nil {
		return nil, fmt.Sprintf("reading frame header: %v", err)
	}
	le := binary.LittleEndian
	if got, want := crc32.Checksum(hdr[:12], castagnoli), le.Uint32(hdr[12:]); got != want {
		return nil, fmt.Sprintf("frame header CRC-32C is %08x, stored %08x", got, want)
	}
	n := int64(le.Uint32(hdr[0:]))
	if n > size-pos-frameLen {
		return nil, fmt.Sprintf("payload of %d bytes cut short (%d in the file)", n, size-pos-frameLen)
	}
	if int64(cap(*buf)) < frameLen+n {
		*buf = make([]byte, frameLen+n)
	}
	b := (*buf)[:frameLen+n]
	copy(b, hdr[:])
	if _, err := r.ReadAt(b[frameLen:], pos+frameLen); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Sprintf("reading payload: %v", err)
	}
	if got, want := crc32.Checksum(b[frameLen:], castagnoli), le.Uint32(hdr[16:]); got != want {
		return nil, fmt.Sprintf("payload CRC-32C is %08x, stored %08x", got, want)
	}
	return b[frameLen:], ""
}

// laterSyncedFrame looks, at every byte offset after a bad frame at bad, for
// a valid frame that says it was written when the log was already durable
// past bad. Only damage to synced bytes can produce one; a crash cannot.
func laterSyncedFrame(r io.ReaderAt, size, bad int64) (int64, bool) {
	const window = 1 << 16
	win := make([]byte, window+frameLen)
	var payload []byte
	le := binary.LittleEndian
	for start := bad + 1; start+frameLen <= size; start += window {
		n, err := r.ReadAt(win[:min(int64(len(win)), size-start)], start)
		if n < frameLen && err != nil {
			return 0, false
		}
		for i := 0; i+frameLen <= n && i < window; i++ {
			h := win[i : i+frameLen]
			if crc32.Checksum(h[:12], castagnoli) != le.Uint32(h[12:]) {
				continue
			}
			pos := start + int64(i)
			if synced := int64(le.Uint64(h[4:])); synced <= bad || synced > pos {
				continue
			}
			if _, why := readFrame(r, size, pos, &payload); why == "" {
				return pos, true
			}
		}
	}
	return 0, false
}
