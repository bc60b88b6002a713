package protocol

import (
	"errors"
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/meta"
)

// Outcome codes, so a client maps a replica's apply-time refusal back to
// the engine's error.
const (
	CodeOK byte = iota
	CodeIDExists
	CodeKeyExists
	CodeNotFound
	CodeDuplicateID
	CodeInvalidKey
	CodeInvalidRow
	CodeOther
	CodeInvalidMeta // metadata the shard cannot store
	CodeTooLarge    // a payload over the engine's limit
	CodeUnreadable  // a message no replica can read, skipped (wire.go)
	CodeSkipped     // a message of a newer format, skipped by an operator's repair record (repair.go)
)

func CodeErr(code byte) error {
	switch code {
	case CodeIDExists:
		return umbra.ErrIDExists
	case CodeKeyExists:
		return umbra.ErrKeyExists
	case CodeNotFound:
		return umbra.ErrNotFound
	case CodeDuplicateID:
		return umbra.ErrDuplicateID
	case CodeInvalidKey:
		return umbra.ErrInvalidKey
	case CodeInvalidRow:
		return umbra.ErrInvalidOption
	case CodeInvalidMeta:
		return umbra.ErrInvalidMeta
	case CodeTooLarge:
		return umbra.ErrTooLarge
	case CodeUnreadable, CodeSkipped:
		return ErrUnreadableMessage
	}
	return errors.New("write refused")
}

// deterministicCode classifies an engine error: a refusal that every
// replica reaches alike from the same message and state (it becomes the
// message's outcome, and the replica moves on), or codeOther for a failure
// of this machine (disk, device), after which the replica retries the same
// message and never skips it.
func DeterministicCode(err error) byte {
	switch {
	case errors.Is(err, umbra.ErrIDExists):
		return CodeIDExists
	case errors.Is(err, umbra.ErrKeyExists):
		return CodeKeyExists
	case errors.Is(err, umbra.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, umbra.ErrDuplicateID):
		return CodeDuplicateID
	case errors.Is(err, umbra.ErrInvalidKey):
		return CodeInvalidKey
	case errors.Is(err, umbra.ErrInvalidMeta):
		// A kind other than the field's, a row over the metadata limits,
		// a field over its distinct values: decided by the message and
		// the shard's rows alone. (ErrTooLarge is not here: the engine
		// also says it of a full device, which is this machine's.)
		return CodeInvalidMeta
	case errors.Is(err, umbra.ErrDimMismatch), errors.Is(err, umbra.ErrNonFinite),
		errors.Is(err, umbra.ErrZeroVector), errors.Is(err, umbra.ErrIDCount),
		errors.Is(err, umbra.ErrInvalidOption):
		return CodeInvalidRow
	}
	return CodeOther
}

// SentinelCap bounds the sentinel rows a replica keeps: when more are
// live, all but the newest are deleted. sentinelMargin is what a search
// asks beyond k so that dropping the sentinels still leaves the exact top
// k; it covers the cap, the one added before a clean-up and one in flight.
const (
	SentinelCap    = 8
	SentinelMargin = SentinelCap + 4
)

// readWrite decodes a stream message for a collection of dimension dim, as
// a replica does before it applies it: the frame, the body, the rows'
// dimension and the metadata's encoding. Its errors are decodeWrite's.
func ReadWrite(data []byte, dim int) (*WriteMsg, *MsgAttrs, error) {
	m, err := DecodeWrite(data)
	if err != nil {
		return nil, nil, err
	}
	if m.Op != OpDelete && m.Dim != dim {
		return nil, nil, fmt.Errorf("%w: rows of dimension %d for a collection of dimension %d", ErrWire, m.Dim, dim)
	}
	if m.Op != OpDelete || m.Keys == nil { // a delete by keys carries no IDs
		for i, id := range m.IDs {
			if id >= ReservedIDs {
				// No client writes one (ErrReservedID); applied, it would
				// read as the replica's applied sequence.
				return nil, nil, fmt.Errorf("%w: row %d names ID %d, one of the cluster's own (from %d)", ErrWire, i, id, ReservedIDs)
			}
		}
	}
	a, err := DecodeAttrs(m)
	if err != nil {
		return nil, nil, err
	}
	return m, a, nil
}

// msgAttrs are a write message's metadata and payloads, decoded.
type MsgAttrs struct {
	MetaSet, PaySet bool
	Meta            []meta.Fields
	Payloads        [][]byte
}

// decodeLimits read a message's metadata rows: wide, so that only bytes
// that are not a canonical encoding make it unreadable; the engine then
// refuses a row over its own limits as the message's outcome, alike on
// every replica.
var DecodeLimits = meta.Limits{MaxFields: 1 << 30, MaxNameBytes: 1 << 30, MaxStringBytes: 1 << 30, MaxTags: 1 << 30, MaxRowBytes: 1 << 30}

// decodeAttrs decodes m's metadata rows. An error means the message
// cannot be read, and every replica skips it.
func DecodeAttrs(m *WriteMsg) (*MsgAttrs, error) {
	a := &MsgAttrs{MetaSet: m.MetaSet, PaySet: m.PaySet, Payloads: m.Payloads}
	if m.MetaSet {
		a.Meta = make([]meta.Fields, len(m.Meta))
		for i, b := range m.Meta {
			if len(b) == 0 {
				continue
			}
			f, err := metaindex.DecodeBinary(b, DecodeLimits)
			if err != nil {
				return nil, fmt.Errorf("%w: metadata of row %d: %w", ErrWire, i, err)
			}
			a.Meta[i] = f
		}
	}
	return a, nil
}

// opts are the engine write options giving rows idx (of the message) their
// attributes, plus extra rows without any (the sentinel).
func (a *MsgAttrs) Opts(idx []int, extra int) []umbra.WriteOption {
	var o []umbra.WriteOption
	if a.MetaSet {
		f := make([]meta.Fields, 0, len(idx)+extra)
		for _, i := range idx {
			f = append(f, a.Meta[i])
		}
		o = append(o, umbra.WithMeta(append(f, make([]meta.Fields, extra)...)...))
	}
	if a.PaySet {
		p := make([][]byte, 0, len(idx)+extra)
		for _, i := range idx {
			p = append(p, a.Payloads[i])
		}
		o = append(o, umbra.WithPayloads(append(p, make([][]byte, extra)...)...))
	}
	return o
}

func Indices(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
