package chroma

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// decodeBoth decodes body into a readRequest and a writeRequest by the
// fast path (decodeLifting) and by encoding/json alone (decode), and
// requires the same values and the same errors.
func decodeBoth(t *testing.T, body []byte) {
	t.Helper()
	var fr, sr readRequest
	ferr := decodeLifting(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &fr, "query_embeddings", &fr.QueryEmbeddings)
	serr := decode(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &sr)
	require.Equal(t, fmt.Sprint(serr), fmt.Sprint(ferr), "body %.200q", body)
	if serr == nil {
		require.Equal(t, sr, fr, "body %.200q", body)
	}
	var fw, sw writeRequest
	ferr = decodeLifting(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &fw, "embeddings", &fw.Embeddings)
	serr = decode(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &sw)
	require.Equal(t, fmt.Sprint(serr), fmt.Sprint(ferr), "body %.200q", body)
	if serr == nil {
		require.Equal(t, sw, fw, "body %.200q", body)
	}
}

// TestFastDecodeMatchesJSON: the fast path reads every body, well formed
// or not, as encoding/json does (values and errors), over random query
// and write bodies and byte-level mutations of them.
func TestFastDecodeMatchesJSON(t *testing.T) {
	rng := testkit.Rand(t)
	num := func() string {
		x := testkit.Vector(rng, 1)[0]
		switch rng.IntN(6) {
		case 0:
			return strconv.FormatFloat(float64(x), 'e', -1, 32)
		case 1:
			return strconv.FormatFloat(float64(x)*1e3, 'f', 3, 64)
		case 2:
			return strconv.Itoa(rng.IntN(2000) - 1000)
		case 3:
			return "1e39" // beyond float32: encoding/json's error
		}
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	body := func() []byte {
		dim := 1 + rng.IntN(8)
		var fields []string
		var qs []string
		for range rng.IntN(3) + 1 {
			var xs []string
			for range dim {
				xs = append(xs, num())
			}
			qs = append(qs, "["+strings.Join(xs, ", ")+"]")
		}
		var bs []string
		for range rng.IntN(3) + 1 {
			bs = append(bs, strconv.Quote(b64(testkit.Vector(rng, dim))))
		}
		fields = append(fields, `"query_embeddings": [`+strings.Join(qs, ",")+`]`)
		fields = append(fields, `"embeddings":[`+strings.Join(bs, ",")+`]`)
		fields = append(fields, `"ids":["a","b\"}]","c"]`, `"n_results": 3`, `"include":["distances"]`,
			`"where":{"k":{"$in":[1,"]"]}}`, `"metadatas":[{"x":"{["}]`)
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		return []byte("{" + strings.Join(fields[:1+rng.IntN(len(fields))], ",") + "}")
	}
	special := []string{
		`{"query_embeddings":[[1,2,3]]}`, `{"query_embeddings":[]}`, `{"query_embeddings":[[]]}`,
		`{"query_embeddings":null}`, `{"query_embeddings":[null]}`, `{"query_embeddings":[[1,null]]}`,
		`{"Query_Embeddings":[[1]]}`, `{"query_embeddings":[[1]],"query_embeddings":[[2]]}`,
		`{"query\u005fembeddings":[[1]]}`, `{"query_embeddings":[[01]]}`, `{"query_embeddings":[[1.]]}`,
		`{"query_embeddings":[[.5]]}`, `{"query_embeddings":[[+1]]}`, `{"query_embeddings":[[Infinity]]}`,
		`{"query_embeddings":[[0x10]]}`, `{"query_embeddings":[[1e]]}`, `{"query_embeddings":[[-0, 1E+2, 2e-3]]}`,
		`{"query_embeddings":[[1,2]]`, `{"query_embeddings":[[1,2]]}x`, ` {"query_embeddings" : [ [ 1 , 2 ] ] } `,
		`{"query_embeddings":[[1,2],]}`, `{"query_embeddings":[[1,2,]]}`, `{"query_embeddings":[[1]] "n_results":1}`,
		`{"embeddings":["AACAPw=="]}`, `{"embeddings":["AACAPw="]}`, `{"embeddings":["AAC\u0041Pw=="]}`,
		`{"embeddings":[[1,2]], "ids":["a"]}`, `{"embeddings":[], "ids":[]}`, `{"embeddings":["AACAPw==",[1]]}`,
		`{"ids":["a"], "embeddings":["AACAPw=="], "n_results":"x"}`, `[1]`, `{}`, `{"a":1}`, ``, `  `, `nul`,
	}
	for _, s := range special {
		decodeBoth(t, []byte(s))
	}
	for range 400 {
		b := body()
		decodeBoth(t, b)
		for range 3 {
			m := bytes.Clone(b)
			switch p := rng.IntN(len(m)); rng.IntN(3) {
			case 0:
				m = append(m[:p], m[p+1:]...)
			case 1:
				m[p] = `{}[]",:\ 0e-.n`[rng.IntN(14)]
			default:
				m = append(m[:p], append([]byte{`{}[]",:\ 0e-.n`[rng.IntN(14)]}, m[p:]...)...)
			}
			decodeBoth(t, m)
		}
	}
}

// TestQueryDecodeAllocs: a query of one 768-dimensional embedding in JSON
// numbers (what every client sends) is decoded without an allocation per
// number.
func TestQueryDecodeAllocs(t *testing.T) {
	rng := testkit.Rand(t)
	q := testkit.Vector(rng, 768)
	body, err := json.Marshal(map[string]any{"query_embeddings": [][]float32{q}, "n_results": 10,
		"include": []string{"metadatas", "documents", "distances"}})
	require.NoError(t, err)
	var got readRequest
	allocs := testing.AllocsPerRun(20, func() {
		got = readRequest{}
		require.NoError(t, decodeLifting(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &got, "query_embeddings", &got.QueryEmbeddings))
	})
	require.Equal(t, [][]float32{q}, [][]float32(*got.QueryEmbeddings))
	require.Less(t, allocs, 100.0, "allocations to decode one query of 768 numbers")
}

// FuzzFastDecode: on any body, the fast path reads what encoding/json
// reads and fails as it fails.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{`{"query_embeddings":[[1,2.5e-3,-0]],"n_results":3}`, `{"ids":["a"],"embeddings":["AACAPw=="],"metadatas":[{"k":"]"}]}`,
		`{"embeddings":[[1],[2]],"documents":["x\"y"]}`, `{"query_embeddings":[[1e39]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { decodeBoth(t, b) })
}
