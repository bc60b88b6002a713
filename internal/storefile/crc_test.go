package storefile

import (
	"bytes"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestCRCCombine: combining the CRCs of two pieces gives the CRC of both,
// for pieces of every small length and random larger ones; the parallel
// checksum equals the serial one.
func TestCRCCombine(t *testing.T) {
	r := testkit.Rand(t)
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

// TestReadChecked: reading a section while checksumming it gives its bytes
// and the CRC-32C of the whole, in one part or several (more than two
// crcPieces); a source that ends early is an error, not a short section.
func TestReadChecked(t *testing.T) {
	r := testkit.Rand(t)
	src := make([]byte, 2*crcPiece+readPiece+777)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, size := range []int{0, 1, readPiece - 1, readPiece + 1, crcPiece + 3, len(src) - 100} {
		off := r.IntN(len(src) - size + 1)
		dst := make([]byte, size)
		got, err := readChecked(bytes.NewReader(src), int64(off), dst)
		require.NoError(t, err, "size %d", size)
		require.Equal(t, src[off:off+size], dst, "size %d", size)
		require.Equal(t, crc32.Checksum(src[off:off+size], castagnoli), got, "size %d", size)
	}
	dst := make([]byte, len(src))
	_, err := readChecked(bytes.NewReader(src[:len(src)-1]), 0, dst)
	require.ErrorIs(t, err, io.EOF)
}
