// Package metaindex is the engine's machinery for package meta's fields
// and filters: Index, the columns kept beside a slab of rows that turn a
// filter into the row bitmap a scan takes (bit i%64 of word i/64 set: row i
// may be returned), and the canonical binary encoding of a row's fields
// that a store file, a log and the cluster's wire carry. meta is what users
// import; this is how umbra keeps and evaluates it.
//
// # Binary encoding
//
// AppendBinary and DecodeBinary are the per-row encoding for a store file
// or log: a row without fields is no bytes; otherwise uvarint(count), then
// per field in byte order of names: uvarint(len) name, kind byte, payload
// (Keyword: uvarint(len) bytes; Int, Time: zigzag varint; Float: 8 bytes
// little-endian IEEE 754; Tags: uvarint(count), then each tag as
// uvarint(len) bytes in byte order). Every varint is minimal, so each row
// has exactly one encoding; DecodeBinary refuses any other (bytes out of
// order, a repeated name or tag, -0, NaN, an unknown kind, trailing bytes).
// Index.MarshalSchema and LoadSchema carry the schema (field names and
// kinds) as one blob: "umeta", a version byte, uvarint(count), then per field
// in name order uvarint(len) name kind.
//
// # Index
//
// Index keeps rows 0..Len()-1 parallel to the engine's slab: Append (after
// Check), Set (an upsert in place), Truncate (an undone append), Keep
// (compaction: new row i is old row rows[i]). A keyword or tags field is a
// dictionary value→code, a per-row code column, and per value a sorted
// posting list of rows — or a bitmap once the value is in 1/32 of the rows
// or more, where a bitmap is no larger (back to a list under 1/128). Eq, In
// and Contains OR postings into the output; Ne, Nin and NotContains
// complement them. An int, float or time field is a dense column of order
// keys (uint64s whose unsigned order is the values' order) and a presence
// bitmap; a range is one branch-free pass over the column, and ranges under
// And are merged per field and evaluated last, only over words where rows
// are still set. Bytes estimates the memory held, for the engine's budgets.
//
// # Cost
//
// BenchmarkEval, 1,000,000 rows (user: 1 of 10,000 keywords; plan: 1 of 2;
// at: a time over one year; price: a float; tags: 1–3 of 40), one core,
// ns per Eval:
//
//	go test -run '^$' -bench Eval -benchtime 1s -count 5 -cpu 1 ./internal/metaindex/
//
// README.md in this directory has the figures and the machine: about 2 µs
// for a keyword matching 1 row in 10,000, 10 µs for one matching half the
// rows, 0.7 ms for a time or float range (0.7 ns per row).
package metaindex
