// Package resolve reads the search and write options of package umbra
// for the collections that honour them (engine.Index, cluster.Collection):
// every rule about options (given twice, a nil option, an option for
// another kind of call) is judged here, once, so it is the same on every
// implementation. What an implementation cannot honour it refuses itself
// (Refuse), naming the option: never ignored.
//
// Users never see this package: they pass umbra.Where(...) and the other
// option functions, whose type (func(*SearchParams)) they need not name.
package resolve

import (
	"errors"
	"fmt"
	"slices"

	"github.com/umbravec/umbra/meta"
)

// ErrInvalidOption is umbra.ErrInvalidOption, declared here so that the
// rules below can wrap it.
var ErrInvalidOption = errors.New("invalid option")

// SearchParams are a search's options, resolved by Search: what an
// implementation of umbra.Collection reads.
type SearchParams struct {
	// Allow holds Allow's IDs: non-nil (empty included) when it was
	// given. AllowFunc is AllowFunc's predicate. At most one of them is
	// set.
	Allow     []uint64
	AllowFunc func(id uint64) bool
	// Where is Where's filter; the zero Filter (not given) matches every
	// row.
	Where meta.Filter
	// MaxHits is MaxHits' cap (SearchRange only; 0: none).
	MaxHits int
	// Approximate, Payload and Eventual are Approximate, WithPayload and
	// Eventual given.
	Approximate, Payload, Eventual bool
	// After is AfterToken's token, nil when it was not given.
	After []uint64

	given  Option
	reject error // the first option's own fault (MaxHits(-1)), or one given twice
}

// WriteParams are a write's options, resolved by Write: what an
// implementation of umbra.Collection reads.
type WriteParams struct {
	// IDs, Keys, Meta and Payloads are what WithIDs, WithKeys, WithMeta
	// and WithPayloads gave: non-nil (empty included) when given, nil
	// otherwise.
	IDs      []uint64
	Keys     []string
	Meta     []meta.Fields
	Payloads [][]byte
	// NoWait is NoWait given; IdempotencyKey is IdempotencyKey's key (""
	// when not given).
	NoWait         bool
	IdempotencyKey string

	given  Option
	reject error
}

// Option names one of umbra's option functions, one bit each, to find
// one given twice and to name it.
type Option uint32

const (
	Allow Option = 1 << iota
	AllowFunc
	Where
	MaxHits
	Approximate
	Payload
	Eventual
	After
	IDs
	Keys
	Meta
	Payloads
	NoWait
	Idempotency
)

var optionNames = map[Option]string{
	Allow: "Allow", AllowFunc: "AllowFunc", Where: "Where", MaxHits: "MaxHits",
	Approximate: "Approximate", Payload: "WithPayload", Eventual: "Eventual", After: "AfterToken",
	IDs: "WithIDs", Keys: "WithKeys", Meta: "WithMeta", Payloads: "WithPayloads",
	NoWait: "NoWait", Idempotency: "IdempotencyKey",
}

// mark records o as given in *set, and reports (into *reject, if it is
// the first fault) an option given twice.
func mark(set *Option, reject *error, o Option) {
	if *set&o != 0 && *reject == nil {
		*reject = fmt.Errorf("%w: %s given twice (give it once, with every value)", ErrInvalidOption, optionNames[o])
	}
	*set |= o
}

// Mark records o as given: an option function calls it first.
func (p *SearchParams) Mark(o Option) { mark(&p.given, &p.reject, o) }

// Mark records o as given: an option function calls it first.
func (p *WriteParams) Mark(o Option) { mark(&p.given, &p.reject, o) }

// Reject records an option's own fault (a bad value), unless an earlier
// one was recorded: the call fails with the first.
func (p *SearchParams) Reject(err error) {
	if p.reject == nil {
		p.reject = err
	}
}

// Reject records an option's own fault, unless an earlier one was.
func (p *WriteParams) Reject(err error) {
	if p.reject == nil {
		p.reject = err
	}
}

// Search applies opts, in order, for the search named verb ("Search",
// "SearchBatch" or "SearchRange"), skipping nil ones. It refuses, with
// ErrInvalidOption naming the option, an option given twice, Allow
// together with AllowFunc, a negative MaxHits, MaxHits outside
// SearchRange and Approximate in it. Every implementation calls it first,
// then refuses what it cannot honour itself (Refuse).
func Search[O ~func(*SearchParams)](verb string, opts []O) (SearchParams, error) {
	var p SearchParams
	for _, o := range opts {
		if o != nil {
			o(&p)
		}
	}
	switch {
	case p.reject != nil:
		return p, p.reject
	case p.given&Allow != 0 && p.given&AllowFunc != 0:
		return p, fmt.Errorf("%w: Allow and AllowFunc together (give one ID filter)", ErrInvalidOption)
	case p.given&MaxHits != 0 && verb != "SearchRange":
		return p, fmt.Errorf("%w: MaxHits bounds SearchRange; %s takes k", ErrInvalidOption, verb)
	case p.Approximate && verb == "SearchRange":
		return p, fmt.Errorf("%w: Approximate with SearchRange, which is always exact", ErrInvalidOption)
	}
	return p, nil
}

// Write applies opts, in order, for the write named verb ("Add",
// "Upsert" or "Delete"), skipping nil ones. It refuses, with
// ErrInvalidOption naming the option, an option given twice, WithIDs
// together with WithKeys outside Add, WithMeta or WithPayloads in a
// Delete, and an option's own fault (an IdempotencyKey that breaks its
// rule). Every implementation calls it first, then refuses what it
// cannot honour itself (Refuse).
func Write[O ~func(*WriteParams)](verb string, opts []O) (WriteParams, error) {
	var p WriteParams
	for _, o := range opts {
		if o != nil {
			o(&p)
		}
	}
	switch {
	case p.reject != nil:
		return p, p.reject
	case p.IDs != nil && p.Keys != nil && verb != "Add":
		return p, fmt.Errorf("%w: %s takes one WithIDs or one WithKeys, not both (both together name new rows, in Add)", ErrInvalidOption, verb)
	case (p.Meta != nil || p.Payloads != nil) && verb == "Delete":
		return p, fmt.Errorf("%w: Delete takes no WithMeta or WithPayloads", ErrInvalidOption)
	}
	return p, nil
}

// Refuse returns ErrInvalidOption naming the first option given of those
// in names (as the option functions are called: "Approximate",
// "Eventual", …), with why, the implementation's reason; nil when none of
// them was given. An implementation calls it for the options it cannot
// honour.
func (p SearchParams) Refuse(why string, names ...string) error { return refuse(p.given, why, names) }

// Refuse is SearchParams.Refuse for a write's options ("NoWait",
// "IdempotencyKey", …).
func (p WriteParams) Refuse(why string, names ...string) error { return refuse(p.given, why, names) }

func refuse(given Option, why string, names []string) error {
	for o := Allow; o <= Idempotency; o <<= 1 {
		if given&o != 0 && slices.Contains(names, optionNames[o]) {
			return fmt.Errorf("%w: %s: %s", ErrInvalidOption, optionNames[o], why)
		}
	}
	return nil
}

// Selection refuses an umbra.Selection no implementation can honour,
// naming the field: IDs with Keys (both given: non-nil), a negative Offset
// or Limit (ErrInvalidOption). Every Get calls it first.
func Selection(ids []uint64, keys []string, offset, limit int) error {
	switch {
	case ids != nil && keys != nil:
		return fmt.Errorf("%w: Selection.IDs and Selection.Keys together: select by one or the other", ErrInvalidOption)
	case offset < 0:
		return fmt.Errorf("%w: Selection.Offset %d: 0 or more", ErrInvalidOption, offset)
	case limit < 0:
		return fmt.Errorf("%w: Selection.Limit %d: 0 for every row, or more", ErrInvalidOption, limit)
	}
	return nil
}
