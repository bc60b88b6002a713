package resolve_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// TestSearchRules: the rules every implementation shares — an
// option given twice, Allow with AllowFunc, a negative MaxHits, MaxHits
// outside SearchRange and Approximate in it are ErrInvalidOption naming
// the option; nil options are skipped.
func TestSearchRules(t *testing.T) {
	tests := []struct {
		name string
		verb string
		opts []umbra.SearchOption
		want string // "" for no error
	}{
		{"nil skipped", "Search", []umbra.SearchOption{nil, umbra.WithPayload(), nil}, ""},
		{"Allow twice", "Search", []umbra.SearchOption{umbra.Allow(1), umbra.Allow(2)}, "Allow given twice"},
		{"Where twice", "Search", []umbra.SearchOption{umbra.Where(meta.Eq("a", meta.IntOf(1))), umbra.Where(meta.Eq("a", meta.IntOf(2)))}, "Where given twice"},
		{"WithPayload twice", "Search", []umbra.SearchOption{umbra.WithPayload(), umbra.WithPayload()}, "WithPayload given twice"},
		{"Allow and AllowFunc", "Search", []umbra.SearchOption{umbra.Allow(1), umbra.AllowFunc(func(uint64) bool { return true })}, "Allow and AllowFunc"},
		{"MaxHits negative", "SearchRange", []umbra.SearchOption{umbra.MaxHits(-1)}, "MaxHits(-1)"},
		{"MaxHits in Search", "Search", []umbra.SearchOption{umbra.MaxHits(3)}, "MaxHits bounds SearchRange"},
		{"MaxHits in SearchRange", "SearchRange", []umbra.SearchOption{umbra.MaxHits(3)}, ""},
		{"Approximate in SearchRange", "SearchRange", []umbra.SearchOption{umbra.Approximate()}, "Approximate with SearchRange"},
		{"Approximate in SearchBatch", "SearchBatch", []umbra.SearchOption{umbra.Approximate()}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve.Search(tc.verb, tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, umbra.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestSearchValues: each option's value reaches the params; Allow
// with no IDs allows nothing (non-nil, empty), and the zero Where is none.
func TestSearchValues(t *testing.T) {
	f := meta.Eq("user", meta.KeywordOf("alice"))
	p, err := resolve.Search("SearchRange", []umbra.SearchOption{umbra.Allow(), umbra.Where(f), umbra.MaxHits(7),
		umbra.WithPayload(), umbra.Eventual(), umbra.AfterToken([]uint64{3, 4})})
	require.NoError(t, err)
	assert.NotNil(t, p.Allow)
	assert.Empty(t, p.Allow)
	assert.Equal(t, f, p.Where)
	assert.Equal(t, 7, p.MaxHits)
	assert.True(t, p.Payload)
	assert.True(t, p.Eventual)
	assert.Equal(t, []uint64{3, 4}, p.After)

	p, err = resolve.Search("Search", []umbra.SearchOption(nil))
	require.NoError(t, err)
	assert.Nil(t, p.Allow)
	assert.Equal(t, meta.Filter{}, p.Where)
}

// TestWriteRules: the write options' shared rules.
func TestWriteRules(t *testing.T) {
	tests := []struct {
		name string
		verb string
		opts []umbra.WriteOption
		want string
	}{
		{"nil skipped", "Add", []umbra.WriteOption{nil, umbra.WithIDs(1), nil}, ""},
		{"WithIDs twice", "Add", []umbra.WriteOption{umbra.WithIDs(1), umbra.WithIDs(2)}, "WithIDs given twice"},
		{"WithKeys twice", "Upsert", []umbra.WriteOption{umbra.WithKeys("a"), umbra.WithKeys("b")}, "WithKeys given twice"},
		{"WithMeta twice", "Add", []umbra.WriteOption{umbra.WithMeta(nil), umbra.WithMeta(nil)}, "WithMeta given twice"},
		{"IDs and keys in Add", "Add", []umbra.WriteOption{umbra.WithIDs(1), umbra.WithKeys("a")}, ""},
		{"IDs and keys in Upsert", "Upsert", []umbra.WriteOption{umbra.WithIDs(1), umbra.WithKeys("a")}, "not both"},
		{"meta in Delete", "Delete", []umbra.WriteOption{umbra.WithIDs(1), umbra.WithMeta(nil)}, "Delete takes no WithMeta"},
		{"bad idempotency key", "Add", []umbra.WriteOption{umbra.IdempotencyKey("a b")}, "idempotency key"},
		{"empty idempotency key", "Add", []umbra.WriteOption{umbra.IdempotencyKey("")}, "idempotency key"},
		{"idempotency key twice", "Add", []umbra.WriteOption{umbra.IdempotencyKey("a"), umbra.IdempotencyKey("a")}, "IdempotencyKey given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve.Write(tc.verb, tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, umbra.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestRefuseNamesTheOption: an implementation's refusal names the option
// given, and is nil when none of the named ones was.
func TestRefuseNamesTheOption(t *testing.T) {
	p, err := resolve.Search("Search", []umbra.SearchOption{umbra.Eventual()})
	require.NoError(t, err)
	err = p.Refuse("local", "Eventual", "AfterToken")
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Eventual: local")
	assert.NoError(t, p.Refuse("x", "Approximate"))

	w, err := resolve.Write("Add", []umbra.WriteOption{umbra.NoWait()})
	require.NoError(t, err)
	assert.True(t, errors.Is(w.Refuse("local", "NoWait"), umbra.ErrInvalidOption))
}

// TestSelectionRules: a Selection of IDs and keys together, or with a
// negative Offset or Limit, is ErrInvalidOption naming the field; empty
// lists (non-nil) of one kind are a selection of no rows, not a fault.
func TestSelectionRules(t *testing.T) {
	assert.NoError(t, resolve.Selection(nil, nil, 0, 0))
	assert.NoError(t, resolve.Selection([]uint64{}, nil, 3, 5))
	for _, tc := range []struct {
		name          string
		ids           []uint64
		keys          []string
		offset, limit int
		want          string
	}{
		{"IDs and Keys", []uint64{1}, []string{"a"}, 0, 0, "Selection.IDs and Selection.Keys"},
		{"empty IDs and Keys", []uint64{}, []string{}, 0, 0, "Selection.IDs and Selection.Keys"},
		{"negative Offset", nil, nil, -1, 0, "Selection.Offset -1"},
		{"negative Limit", nil, nil, 0, -2, "Selection.Limit -2"},
	} {
		err := resolve.Selection(tc.ids, tc.keys, tc.offset, tc.limit)
		require.ErrorIs(t, err, umbra.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
}
