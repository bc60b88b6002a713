// Package meta is typed metadata per row and exact filters over it: the
// values, their JSON and binary encodings, the where syntax, and Index, the
// columns kept beside a slab of rows that turn a filter into the row bitmap
// a scan takes (bit i%64 of word i/64 set: row i may be returned).
//
// # Kinds
//
// A row's metadata is a Fields map from field name to Value. A value has
// one of five kinds:
//
//	Keyword  a string, compared for equality            KeywordOf("ann")
//	Int      an int64                                   IntOf(42)
//	Float    a finite float64; -0 is stored as 0        FloatOf(2.5)
//	Time     an instant, as int64 Unix nanoseconds      TimeOf(t)
//	Tags     a set of strings, sorted, no duplicates    TagsOf("red", "new")
//
// A field's kind is fixed by its first value in an Index (or by Declare);
// a later value of another kind is an error. An empty tag set is a value: the
// row has the field, with no tags. Field names are non-empty valid UTF-8 and
// do not start with '$' (reserved for operators); keywords and tags are valid
// UTF-8. NaN, ±Inf and instants outside 1677-09-21..2262-04-11 (what int64
// nanoseconds hold) are refused wherever values are validated.
//
// # JSON
//
// One JSON object per row (ParseFields, Fields.AppendJSON):
//
//	{"user": "ann", "age": 42, "score": 0.75, "tags": ["red", "new"],
//	 "at": {"$time": "2024-05-01T12:00:00Z"}}
//
// A string is a Keyword; an integer written without fraction or exponent is
// an Int (one that does not fit int64 is an error, not a silently rounded
// float); any other number is a Float (2.0 and 2e0 are floats); an array of
// strings is a Tags set; {"$time": "RFC 3339"} is a Time. null, booleans,
// other objects, arrays of anything but strings and duplicate field names
// are errors naming the field. AppendJSON is canonical: fields sorted by
// name, no spaces, a Float always with a fraction or an exponent (2.0,
// 1e+21) so that it reads back as a Float, a Time in RFC 3339 with
// nanoseconds in UTC; ParseFields(AppendJSON(f)) equals f for every valid f.
//
// # Filters
//
// Filters are built with Eq, Ne, Gt, Gte, Lt, Lte, In, Nin, Contains,
// NotContains, And, Or and Not, or read by ParseWhere from Chroma's where
// syntax:
//
//	{"user": "ann"}                                   equality
//	{"age": {"$gte": 18, "$lt": 65}}                  operators: $eq $ne $gt $gte $lt $lte
//	{"user": {"$in": ["ann", "bob"]}}                 $in, $nin
//	{"tags": {"$contains": "red"}}                    $contains, $not_contains (tags fields)
//	{"at": {"$gt": {"$time": "2024-05-01T00:00:00Z"}}}
//	{"$and": [{...}, {...}]}  {"$or": [...]}  {"$not": {...}}
//	{"user": "ann", "age": 3}                         several keys: all must hold
//
// Several operators on one field, or several keys in one object, all must
// hold. {} and {"$and": []} match every row; {"$or": []} and {"$in": []}
// none; {"$nin": []} every row. Nesting is bounded (32 objects). Operand
// values are typed as in JSON rows.
//
// Kinds at evaluation (Index.Eval, against the index's schema): a keyword
// field takes $eq, $ne, $in, $nin with strings; an int or float field takes
// every operator but $contains with ints or floats, compared numerically and
// exactly (age > 2.5 on an int field, price == 3 on a float field; no
// rounding at 2^53 or 2^63); a time field takes the same operators with
// {"$time": ...} values only (an integer is not read as seconds or
// nanoseconds — no unit to guess); a tags field takes $contains and
// $not_contains only. An unknown field is an error listing the known ones
// (a typo must not filter everything out), and so is a value or operator
// that does not fit the field's kind.
//
// # Rows without the field
//
// A row that lacks a field never matches $eq, $gt, $gte, $lt, $lte, $in or
// $contains on it, and always matches $ne, $nin and $not_contains: each
// negative operator is exactly the complement of its positive one. This is
// Chroma's rule since its $ne/$nin change (chroma-core/chroma#4315: they
// "also match records that don't have the specified key at all"). $not,
// which Chroma lacks, is the complement over every row.
//
// # Limits
//
// Limits bound a row (fields, name and string bytes, tags, encoded bytes) and
// an Index (distinct keyword or tag values per field, fields in all). The
// zero Limits takes the defaults: 64 fields, 256-byte names, 4096-byte
// strings, 1024 tags, 64 KiB per row, 2^20 distinct values per field, 1024
// fields. Errors wrap ErrInvalid (bad input, a kind mismatch, an unknown
// field) or ErrTooLarge (a limit), name the field and, in a batch, the row's
// index in it. The readers stop at the first thing over a limit, so hostile
// input (millions of tags, deep nesting, huge strings) costs no more memory
// than the input itself.
//
// A where document holds at most MaxWhereTerms (65,536) terms and nests at
// most 32 objects; ParseWhere allocates at most WhereAllocPerByte (32)
// bytes per byte of it, whatever its shape, by a JSON reader of this
// package's own (scan.go) that borrows the input's bytes instead of boxing
// each token.
//
// Strings read from JSON are Unicode text: a \u escape of a lone UTF-16
// surrogate ("\ud800", "\udc00", "\ud800\u0041") or a byte that is not
// UTF-8 is an ErrInvalid naming the field, the operator and the offset —
// encoding/json would read either as U+FFFD, so a stored or matched string
// would differ from the one written. A surrogate pair is its character.
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
//	go test -run '^$' -bench Eval -benchtime 1s -count 5 -cpu 1 ./meta/
//
// README.md in this directory has the figures and the machine: about 2 µs
// for a keyword matching 1 row in 10,000, 10 µs for one matching half the
// rows, 0.7 ms for a time or float range (0.7 ns per row).
package meta
