package storefile

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"
)

// ErrChanged: the file under a MappedBase was truncated, rewritten or
// otherwise modified in place after it was mapped, so the mapped rows can
// no longer be trusted.
var ErrChanged = errors.New("mapped file changed underneath")

// MappedBase is a base file whose rows are read straight from a private
// memory mapping of the file rather than copied into the heap: the CPU
// path's way to open an index without reading it into memory. Its Snapshot
// is complete and verified (every CRC checked, which touches every page
// once).
//
// The mapping is private and copy-on-write (MAP_PRIVATE, readable and
// writable): writing to Rows copies the page written to into the process's
// own memory and never reaches the file, so the caller may change rows in
// place while the file stays exactly as written. Rows is valid only until
// Close.
//
// The mapping keeps the file's contents after a Checkpoint renames a new
// base over the path (the old file lives on, unlinked, until Close).
// Nothing in this package truncates or writes a base in place; another
// process that did would make the rows wrong (a rewrite) or make reading
// them fault (a truncation: SIGBUS, which Go turns into a crash unless the
// reading goroutine has set debug.SetPanicOnFault). Changed detects the
// first, Contains recognises the second's fault address.
type MappedBase struct {
	*Snapshot
	Generation uint64

	file  *os.File // kept open for Changed; nil when not mapped
	size  int64
	mtime time.Time
	rows  sectionEntry // the rows section: where it lies and its CRC-32C

	mu    sync.Mutex
	ctime [3]int64 // changeStamp when mapped, or when the rows were last verified
	start uintptr  // the mapping's address range [start, end)
	end   uintptr
	unmap func() error
}

// Mapped reports whether Rows aliases a mapping (false where MapBase read
// the rows instead).
func (m *MappedBase) Mapped() bool { return m.unmap != nil }

// Contains reports whether addr lies in the mapping: a fault there means
// the file shrank under it.
func (m *MappedBase) Contains(addr uintptr) bool {
	return m.unmap != nil && addr >= m.start && addr < m.end
}

// Changed returns an error wrapping ErrChanged when the mapped file's
// size, modification time or status-change time differs from when it was
// mapped: someone truncated, extended or wrote it in place. The last
// catches a rewrite that restores the size and the modification time
// (which any process may set); only one that lands within the file
// system's timestamp granularity of the file's last change before it was
// mapped goes unseen. A new status-change time alone (a chmod, a touch
// that restored the time) is not a change when the rows on disk still
// have the CRC-32C they were mapped with: Changed then reads them once to
// see, and takes the new time as the mapped one.
//
// Unlinking also sets the status-change time, so that time is compared
// only while the file has the links it had when mapped: once a
// checkpoint's rename over the path has unlinked it, no process can open
// it by name to rewrite it, and size and modification time remain the
// check. (The rename itself does not change the mapped file.) Without a
// change it is two fstats, cheap enough to call after every read of the
// rows. It returns nil for an unmapped base.
func (m *MappedBase) Changed() error {
	if m.file == nil {
		return nil
	}
	st, err := m.file.Stat()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrChanged, m.file.Name(), err)
	}
	if st.Size() != m.size || !st.ModTime().Equal(m.mtime) {
		return fmt.Errorf("%w: %s was %d bytes modified at %s when mapped, is now %d bytes modified at %s",
			ErrChanged, m.file.Name(), m.size, m.mtime.Format(time.RFC3339Nano), st.Size(), st.ModTime().Format(time.RFC3339Nano))
	}
	ct, err := changeStamp(m.file)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrChanged, m.file.Name(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ct[2] != m.ctime[2] || ct == m.ctime {
		return nil
	}
	// Same size, time and links, new status: a chmod, a touch that put the
	// time back, or a rewrite that restored both. The rows on disk decide:
	// bytes whose CRC-32C is the one they were mapped with leave every
	// page of the mapping as it was.
	if err := m.verifyRows(); err != nil {
		return fmt.Errorf("%w: %s had its status changed at %s after it was mapped (at %s), and %v",
			ErrChanged, m.file.Name(), time.Unix(ct[0], ct[1]).Format(time.RFC3339Nano),
			time.Unix(m.ctime[0], m.ctime[1]).Format(time.RFC3339Nano), err)
	}
	after, err := changeStamp(m.file)
	if err != nil || after != ct {
		return fmt.Errorf("%w: %s changed again while its rows were verified", ErrChanged, m.file.Name())
	}
	m.ctime = ct
	return nil
}

// verifyRows reads the rows section from the file (not the mapping, whose
// pages the caller may have written) and compares its CRC-32C with the
// one it was mapped with.
func (m *MappedBase) verifyRows() error {
	buf := make([]byte, min(m.rows.length, 4<<20))
	var c uint32
	for off := uint64(0); off < m.rows.length; {
		n := min(uint64(len(buf)), m.rows.length-off)
		if _, err := m.file.ReadAt(buf[:n], int64(m.rows.offset+off)); err != nil {
			return fmt.Errorf("its rows could not be read again: %v", err)
		}
		c = crc32.Update(c, castagnoli, buf[:n])
		off += n
	}
	if c != m.rows.crc {
		return fmt.Errorf("its rows' CRC-32C is now %08x, not %08x", c, m.rows.crc)
	}
	return nil
}

// Close releases the mapping. Rows must not be used afterwards.
func (m *MappedBase) Close() error {
	var err error
	if m.unmap != nil {
		err = m.unmap()
	}
	if m.file != nil {
		if cerr := m.file.Close(); err == nil {
			err = cerr
		}
	}
	m.unmap, m.file, m.Rows = nil, nil, nil
	return err
}

// MapBase opens the base file at path like ReadBase, but maps its rows
// section instead of reading it, and verifies the rows' CRC over the
// mapping. Where mapping is unavailable (systems without mmap, big-endian
// hosts where the file's byte order is not the memory's) or pointless (no
// rows), it reads the rows as ReadBase does and Close is a no-op.
func MapBase(path string) (_ *MappedBase, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("map base: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("map base: %w", err)
	}
	h, err := readBaseHeader(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	if h.count == 0 || !littleEndianHost || !canMap {
		s, gen, err := readBase(f, st.Size(), path)
		if err != nil {
			return nil, err
		}
		return &MappedBase{Snapshot: s, Generation: gen}, nil
	}
	ctime, err := changeStamp(f)
	if err != nil {
		return nil, fmt.Errorf("map base %s: %w", path, err)
	}
	rows, start, end, unmap, err := mapRows(f, h, path)
	if err != nil {
		return nil, err
	}
	s, err := readBaseRest(f, h, path, rows)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	keep = true
	return &MappedBase{Snapshot: s, Generation: h.generation, file: f, size: st.Size(), mtime: st.ModTime(), ctime: ctime, rows: h.table[0],
		start: start, end: end, unmap: unmap}, nil
}
