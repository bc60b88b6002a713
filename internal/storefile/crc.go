package storefile

import (
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
)

// crcPiece is the least a goroutine checksums of a large section: below
// it, starting one costs more than it saves.
const crcPiece = 8 << 20

// checksum is crc32.Checksum(b, castagnoli) over all cores for a large b
// (crcParts). b may be a mapping: a piece whose pages fault (the file
// shrank) is an error, not a crash.
func checksum(b []byte) (uint32, error) {
	return crcParts(len(b), func(lo, hi int) (c uint32, err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("reading bytes %d to %d: %v", lo, hi, r)
			}
		}()
		return crc32.Checksum(b[lo:hi], castagnoli), nil
	})
}

// readPiece is how much of a section readChecked reads before it
// checksums it: small enough to be still in cache when the CRC reads it.
const readPiece = 1 << 20

// readChecked fills dst with the bytes of r at off and returns their
// CRC-32C, on all cores for a large dst (crcParts; ReadAt is safe to call
// concurrently), each part read a piece at a time and each piece
// checksummed while it is in cache. A short read is an error.
func readChecked(r io.ReaderAt, off int64, dst []byte) (uint32, error) {
	return crcParts(len(dst), func(lo, hi int) (uint32, error) {
		var c uint32
		for at := lo; at < hi; at += readPiece {
			p := dst[at:min(at+readPiece, hi)]
			if n, err := r.ReadAt(p, off+int64(at)); err != nil && !(err == io.EOF && n == len(p)) {
				return 0, err
			}
			c = crc32.Update(c, castagnoli, p)
		}
		return c, nil
	})
}

// crcParts returns the CRC-32C of n bytes from part, which returns the CRC
// of bytes [lo, hi): for n of at least two crcPieces, consecutive parts on
// up to every core at once, their CRCs combined into the whole's
// (crcCombine), the same value; otherwise one part on the calling
// goroutine. The first part's error, if any, is returned.
func crcParts(n int, part func(lo, hi int) (uint32, error)) (uint32, error) {
	w := min(runtime.GOMAXPROCS(0), n/crcPiece)
	if w <= 1 {
		return part(0, n)
	}
	per := (n + w - 1) / w
	crcs := make([]uint32, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := i*per, min((i+1)*per, n)
		wg.Go(func() { crcs[i], errs[i] = part(lo, hi) })
	}
	wg.Wait()
	var c uint32
	for i := range w {
		if errs[i] != nil {
			return 0, errs[i]
		}
		lo, hi := i*per, min((i+1)*per, n)
		if i == 0 {
			c = crcs[0]
		} else {
			c = crcCombine(c, crcs[i], int64(hi-lo))
		}
	}
	return c, nil
}

// crcCombine returns the CRC-32C of A followed by B from crcA, crcB and
// B's length, as zlib's crc32_combine does for its polynomial: crcA is
// carried through len2 zero bytes by squaring the one-zero-bit operator
// (a GF(2) matrix), then crcB is added.
func crcCombine(crcA, crcB uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	odd[0] = crc32.Castagnoli // reflected, as hash/crc32 holds it
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four zero bits
	for {
		gf2Square(&even, &odd)
		if len2&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
		gf2Square(&odd, &even)
		if len2&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range 32 {
		square[n] = gf2Times(mat, mat[n])
	}
}
