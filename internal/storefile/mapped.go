package storefile

import (
	"fmt"
	"os"
)

// MappedBase is a base file whose rows are read straight from a read-only
// memory mapping of the file rather than copied into the heap: the CPU
// path's way to open an index larger than it wants to hold twice. Its
// Snapshot is complete and verified (every CRC checked, which touches every
// page once); Rows aliases the mapping, so writing to it faults, and it is
// valid only until Close.
//
// The mapping keeps the file's contents even after a Checkpoint renames a
// new base over the path. Nothing in this package truncates a base in
// place; a process that did would make reads of the mapping fault.
type MappedBase struct {
	*Snapshot
	Generation uint64
	unmap      func() error
}

// Close releases the mapping. Rows must not be used afterwards.
func (m *MappedBase) Close() error {
	var err error
	if m.unmap != nil {
		err = m.unmap()
	}
	m.unmap, m.Rows = nil, nil
	return err
}

// MapBase opens the base file at path like ReadBase, but maps its rows
// section instead of reading it. Where mapping is unavailable (systems
// without mmap, big-endian hosts where the file's byte order is not the
// memory's) or pointless (no rows), it reads the rows as ReadBase does and
// Close is a no-op.
func MapBase(path string) (*MappedBase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("storefile: map base: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("storefile: map base: %w", err)
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
	rows, unmap, err := mapRows(f, h, path)
	if err != nil {
		return nil, err
	}
	s, err := readBaseRest(f, h, path, rows)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	return &MappedBase{Snapshot: s, Generation: h.generation, unmap: unmap}, nil
}
