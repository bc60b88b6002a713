package growbuf

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestGrowCopies: the grown slice holds s, then zeros, with the length
// and capacity asked, for sizes below and above a copy chunk, and for
// elements of several sizes.
func TestGrowCopies(t *testing.T) {
	r := testkit.Rand(t)
	for _, n := range []int{0, 1, 1000, chunkBytes/4 - 1, chunkBytes/4 + 1, 3*chunkBytes/4 + r.IntN(1000), 8*chunkBytes/4 + r.IntN(1<<20)} {
		s := make([]float32, n)
		for i := range s {
			s[i] = r.Float32()
		}
		length := n + r.IntN(5000)
		g := Grow(s, length, length+r.IntN(5000))
		require.Equal(t, length, len(g))
		require.GreaterOrEqual(t, cap(g), length)
		require.Equal(t, s, g[:n], "n=%d", n)
		for _, v := range g[n:cap(g)] {
			require.Zero(t, v)
		}
	}
	b := make([]byte, 3*chunkBytes+7)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	require.Equal(t, b, Grow(b, len(b), len(b)+1)[:len(b)])
	type pair struct{ a, b uint64 }
	p := []pair{{1, 2}, {3, 4}}
	require.Equal(t, []pair{{1, 2}, {3, 4}, {}}, Grow(p, 3, 3))
}

// TestCopyIsCopy: Copy copies what copy copies and returns the same count,
// whichever of dst and src is shorter.
func TestCopyIsCopy(t *testing.T) {
	r := testkit.Rand(t)
	for range 20 {
		src := make([]uint16, r.IntN(3*chunkBytes/2))
		for i := range src {
			src[i] = uint16(r.Uint32())
		}
		a := make([]uint16, r.IntN(3*chunkBytes/2))
		b := make([]uint16, len(a))
		require.Equal(t, copy(a, src), Copy(b, src))
		// slices.Equal first, require.Equal only to report a difference:
		// reflect.DeepEqual over these megabytes was nearly all of the
		// test's time under -race.
		if !slices.Equal(a, b) {
			require.Equal(t, a, b)
		}
	}
}
