package protocol

func Wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
