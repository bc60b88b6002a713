// Package meta is the vocabulary of typed metadata per row and exact
// filters over it: the values, their JSON encoding, the filters and the
// where syntax that reads them, and the limits that bound them.
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
// A field's kind is fixed by its first value in an index (or by declaring
// it: engine.Config.Fields);
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
// Kinds at evaluation (against the index's schema): a keyword
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
// an index (distinct keyword or tag values per field, fields in all). The
// zero Limits takes the defaults: 64 fields, 256-byte names, 4096-byte
// strings, 1024 tags, 64 KiB per row, 2^20 distinct values per field, 1024
// fields. Errors wrap ErrInvalid (bad input, a kind mismatch, an unknown
// field) or ErrTooLarge (a limit), name the field and, in a batch, the row's
// index in it. The readers stop at the first thing over a limit, so hostile
// input (millions of tags, deep nesting, huge strings) costs no more memory
// than the input itself.
//
// A where document holds at most MaxWhereTerms (65,536) terms and nests at
// most 32 objects; ParseWhere allocates at most 32 bytes per byte of it,
// whatever its shape, by a JSON reader of this package's own (scan.go)
// that borrows the input's bytes instead of boxing each token.
//
// Strings read from JSON are Unicode text: a \u escape of a lone UTF-16
// surrogate ("\ud800", "\udc00", "\ud800\u0041") or a byte that is not
// UTF-8 is an ErrInvalid naming the field, the operator and the offset —
// encoding/json would read either as U+FFFD, so a stored or matched string
// would differ from the one written. A surrogate pair is its character.
//
// # Evaluation
//
// An engine.Index or a cluster collection keeps the fields of its rows in
// columns beside its vectors and turns a filter into the set of rows a
// search may return; that machinery, and the binary encoding a store file
// and the cluster's wire carry, are umbra's own (internal/metaindex). A
// program that checks filters against a schema of its own or translates
// them into another store's query reads them through Filter.Parts.
package meta
