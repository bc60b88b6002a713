package storefile

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"unsafe"
)

// castagnoli is CRC-32C, the checksum of every section and record: hardware
// accelerated on amd64 and arm64, and better at burst errors than IEEE.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// littleEndianHost is true where a []float32's memory already is the file's
// byte order, so rows are read and written in place without a second copy.
var littleEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// floatBytes views fs as bytes. Only meaningful as file bytes on a
// little-endian host; elsewhere callers swap in place after reading.
func floatBytes(fs []float32) []byte {
	if len(fs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&fs[0])), len(fs)*4)
}

// fixFloatsFromLE converts, in place, floats whose memory holds
// little-endian file bytes into native floats. A no-op on little-endian
// hosts.
func fixFloatsFromLE(fs []float32) {
	if littleEndianHost {
		return
	}
	b := floatBytes(fs)
	for i := range fs {
		fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// appendFloatsLE appends fs in file byte order.
func appendFloatsLE(dst []byte, fs []float32) []byte {
	if littleEndianHost {
		return append(dst, floatBytes(fs)...)
	}
	for _, f := range fs {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst
}
