package shaders

import (
	"encoding/binary"
	"math"
)

// The binary layouts the shaders read and write, owned here so that no
// byte offset is written anywhere else.

// ParamsBytes is the size of the per-chunk Params uniform (common.wgsl's
// "params" fragment, which scores.wgsl, quant.wgsl and topk.wgsl's scan
// share).
const ParamsBytes = 48

// Params is the per-chunk uniform of scores.wgsl, quant.wgsl and
// topk.wgsl's scan: common.wgsl's struct Params, field for field.
type Params struct {
	Rows    uint32 // rows in this chunk
	GroupsX uint32 // grid width in workgroups
	Base    uint32 // global index of the chunk's first row
	Total   uint32 // rows in the whole index: the stride between queries' scores
	Queries uint32 // queries in this submission
	// The fused scan's (topk.wgsl) fields.
	K        uint32 // hits per query
	Masked   uint32 // bit 0: only rows set in the allow bitmap take part; >> 1: where the resident tombstones start (MaskedWith)
	ListBase uint32 // the chunk's first candidate list
	Lists    uint32 // candidate lists per query over every chunk
}

// Encode returns p as the uniform's bytes; the padding is zero, which
// every float32 kernel reads as its accumulators' start.
func (p Params) Encode() []byte {
	b := make([]byte, ParamsBytes)
	for i, v := range []uint32{p.Rows, p.GroupsX, p.Base, p.Total, p.Queries, p.K, p.Masked, p.ListBase, p.Lists} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// HitBytes is the size of one hit select.wgsl writes: the score's bits,
// then the row.
const HitBytes = 8

// SortLimit is the largest k whose hits select.wgsl's sort orders on the
// device after the radix select (one workgroup per query, a bitonic
// network over the next power of two, 105 steps at 16,384); the host sorts
// the hits of a larger k.
const SortLimit = 1 << 14

// DecodeHit reads one hit written by select.wgsl.
func DecodeHit(b []byte) (score float32, row uint32) {
	return math.Float32frombits(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint32(b[4:])
}

// MaskedWith is the masked word of topk.wgsl's Params and select.wgsl's
// State: bit 0 set when a per-search allow bitmap starts at word 0 of the
// allow binding, and deadAt (a u32 word index, not 0; 0: none) where the
// resident tombstone bitmap starts in the same binding, shifted up one.
func MaskedWith(allow bool, deadAt uint32) uint32 {
	m := deadAt << 1
	if allow {
		m |= 1
	}
	return m
}

// SelectState returns the initial select.wgsl State of nq queries, each
// selecting k of rows scores (k at most the rows the allow bitmap and the
// tombstones admit): prefix 0, round 0, remaining k, count 0, an empty
// histogram; masked is MaskedWith's word.
func SelectState(nq, rows, k int, masked uint32) []byte {
	b := make([]byte, nq*StateBytes)
	for i := 0; i < nq; i++ {
		s := b[i*StateBytes:]
		binary.LittleEndian.PutUint32(s[8:], uint32(k))     // remaining
		binary.LittleEndian.PutUint32(s[20:], uint32(rows)) // n
		binary.LittleEndian.PutUint32(s[24:], uint32(k))    // k
		binary.LittleEndian.PutUint32(s[32:], masked)
	}
	return b
}

// MergeParamsBytes is the size of topk.wgsl's MergeParams uniform.
const MergeParamsBytes = 16

// MergeParams returns topk.wgsl's merge uniform: k hits per query from
// lists candidate lists of k each.
func MergeParams(k, lists int) []byte {
	b := make([]byte, MergeParamsBytes)
	binary.LittleEndian.PutUint32(b[0:], uint32(k))
	binary.LittleEndian.PutUint32(b[4:], uint32(lists))
	return b
}

// ReadParamsBytes is the size of read.wgsl's ReadParams uniform.
const ReadParamsBytes = 16

// ReadParams returns read.wgsl's uniform for a chunk of words vec4 words;
// its magic is a value no sum of squares takes, so the shader never
// writes but no compiler can prove it.
func ReadParams(words uint32) []byte {
	b := make([]byte, ReadParamsBytes)
	binary.LittleEndian.PutUint32(b[0:], words)
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(-1))
	return b
}
