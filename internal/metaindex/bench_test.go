package metaindex

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/umbravec/umbra/meta"
)

// The Eval benchmarks run on one index of 1,000,000 rows, built once:
// user: one of 10,000 keywords; plan: one of 2; at: a time spread over one
// year; price: a float; tags: 1 to 3 of 40 tags.
const benchRows = 1_000_000

var (
	benchOnce  sync.Once
	benchIndex *Index
	benchStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

func benchIdx(b *testing.B) *Index {
	benchOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		x := NewIndex(meta.Limits{})
		year := int64(365 * 24 * time.Hour)
		plans := []string{"free", "paid"}
		batch := make([]meta.Fields, 0, 10000)
		for i := range benchRows {
			tags := make([]string, 1+r.IntN(3))
			for j := range tags {
				tags[j] = fmt.Sprintf("t%d", r.IntN(40))
			}
			batch = append(batch, meta.Fields{
				"user":  meta.KeywordOf(fmt.Sprintf("u%d", r.IntN(10000))),
				"plan":  meta.KeywordOf(plans[r.IntN(2)]),
				"at":    meta.TimeOf(benchStart.Add(time.Duration(r.Int64N(year)))),
				"price": meta.FloatOf(r.Float64() * 100),
				"tags":  meta.TagsOf(tags...),
			})
			if len(batch) == cap(batch) || i == benchRows-1 {
				if err := x.Append(batch); err != nil {
					panic(err)
				}
				batch = batch[:0]
			}
		}
		benchIndex = x
	})
	return benchIndex
}

func BenchmarkEval(b *testing.B) {
	x := benchIdx(b)
	month := func(m int) meta.Value { return meta.TimeOf(benchStart.AddDate(0, m, 0)) }
	cases := []struct {
		name string
		f    meta.Filter
	}{
		{"keyword-eq-1-of-10000", meta.Eq("user", meta.KeywordOf("u1234"))},
		{"keyword-eq-1-of-2", meta.Eq("plan", meta.KeywordOf("free"))},
		{"keyword-in-100-of-10000", meta.In("user", func() []meta.Value {
			var vs []meta.Value
			for i := range 100 {
				vs = append(vs, meta.KeywordOf(fmt.Sprintf("u%d", i*97)))
			}
			return vs
		}()...)},
		{"time-range-1-month", meta.And(meta.Gte("at", month(3)), meta.Lt("at", month(4)))},
		{"time-gte", meta.Gte("at", month(6))},
		{"float-lt", meta.Lt("price", meta.FloatOf(10))},
		{"tags-contains-1-of-40", meta.Contains("tags", "t7")},
		{"and-of-3", meta.And(meta.Eq("plan", meta.KeywordOf("paid")), meta.Contains("tags", "t7"), meta.Gte("at", month(6)))},
		{"and-user-time", meta.And(meta.Eq("user", meta.KeywordOf("u1234")), meta.Gte("at", month(6)))},
		{"ne-1-of-10000", meta.Ne("user", meta.KeywordOf("u1234"))},
	}
	out := make([]uint64, words(x.Len()))
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := x.Eval(c.f, out); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			for _, w := range out {
				n += popcount(w)
			}
			b.ReportMetric(float64(n), "rows")
		})
	}
}

func popcount(w uint64) int {
	n := 0
	for w != 0 {
		w &= w - 1
		n++
	}
	return n
}

// BenchmarkIndexAppend is the cost of adding rows of five fields.
func BenchmarkIndexAppend(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]meta.Fields, 10000)
	for i := range rows {
		rows[i] = meta.Fields{
			"user": meta.KeywordOf(fmt.Sprintf("u%d", r.IntN(10000))),
			"plan": meta.KeywordOf("free"),
			"at":   meta.TimeOf(benchStart.Add(time.Duration(r.Int64N(1e15)))),
			"tags": meta.TagsOf("a", fmt.Sprintf("t%d", r.IntN(40))),
		}
	}
	for b.Loop() {
		x := NewIndex(meta.Limits{})
		if err := x.Append(rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkParseWhere: what reading a large filter costs; B/op is the
// bytes meta.ParseWhere allocates per filter (docs/memory.md, "Limits"):
//
//	go test -run '^$' -bench meta.ParseWhere -benchmem ./meta/
func BenchmarkParseWhere(b *testing.B) {
	ints := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprint(1000000 + i)
		}
		return `{"id":{"$in":[` + strings.Join(parts, ",") + `]}}`
	}
	ors := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"user":"u%06d"}`, i)
		}
		return `{"$or":[` + strings.Join(parts, ",") + `]}`
	}
	for _, c := range []struct{ name, doc string }{
		{"or-32000", ors(32000)},
		{"in-65000", ints(65000)},
		{"or-4MB", ors(4 << 20 / 18)}, // over meta.MaxWhereTerms: refused
		{"in-500000", ints(500000)},   // over meta.MaxWhereTerms: refused
	} {
		doc := []byte(c.doc)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = meta.ParseWhere(doc)
			}
		})
	}
}
