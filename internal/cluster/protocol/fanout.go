package protocol

const (
	HdrChunk  = "Umbra-Chunk" // "i/n": this message is piece i of n of one reply
	ChunkRoom = 1024          // bytes left under the max payload for headers
)

// chunks splits b into pieces under the connection's max payload.
func Chunks(b []byte, maxPayload int64) [][]byte {
	size := int(maxPayload) - ChunkRoom
	if size < 1024 {
		size = 1024
	}
	var out [][]byte
	for len(b) > size {
		out = append(out, b[:size])
		b = b[size:]
	}
	return append(out, b)
}
