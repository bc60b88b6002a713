package storefile

import (
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCRCCombine: combining the CRCs of two pieces gives the CRC of both,
// for pieces of every small length and random larger ones; the parallel
// checksum equals the serial one.
func TestCRCCombine(t *testing.T) {
	r := newRand(t)
	b := make([]byte, 3*crcPiece+12345)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for _, cut := range []int{0, 1, 2, 3, 7, 64, 1000, 4096, r.IntN(len(b)), len(b) - 1, len(b)} {
		want := crc32.Checksum(b, castagnoli)
		got := crcCombine(crc32.Checksum(b[:cut], castagnoli), crc32.Checksum(b[cut:], castagnoli), int64(len(b)-cut))
		require.Equal(t, want, got, "cut at %d", cut)
	}
	for _, n := range []int{0, 1, crcPiece - 1, 2 * crcPiece, len(b)} {
		got, err := checksum(b[:n])
		require.NoError(t, err)
		require.Equal(t, crc32.Checksum(b[:n], castagnoli), got, "%d bytes", n)
	}
}
