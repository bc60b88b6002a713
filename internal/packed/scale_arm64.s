//go:build arm64 && !purego

#include "textflag.h"

// func scaleNEON(dst, src *float32, n int, inv float64)
//
// dst[i] = float32(float64(src[i]) * inv) for i < n, eight at a time:
// FCVTL widens exactly, FMUL rounds each product once as FMULD does, and
// FCVTN rounds to float32 under the same FPCR mode as FCVTDS, so the
// result is bit for bit what the Go loop computes (FCVTSD, FMULD, FCVTDS).
// Go's assembler has none of the three vector forms; their WORD encodings
// were checked with llvm-mc -triple=aarch64 -show-encoding.
TEXT ·scaleNEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	FMOVD inv+24(FP), F0
	VDUP  V0.D[0], V0.D2
	LSR   $3, R2, R3
	AND   $7, R2, R2
	CBZ   R3, tail

loop8:
	VLD1.P 32(R1), [V1.S4, V2.S4]
	WORD   $0x0e617823 // fcvtl v3.2d, v1.2s
	WORD   $0x4e617824 // fcvtl2 v4.2d, v1.4s
	WORD   $0x0e617845 // fcvtl v5.2d, v2.2s
	WORD   $0x4e617846 // fcvtl2 v6.2d, v2.4s
	WORD   $0x6e60dc63 // fmul v3.2d, v3.2d, v0.2d
	WORD   $0x6e60dc84 // fmul v4.2d, v4.2d, v0.2d
	WORD   $0x6e60dca5 // fmul v5.2d, v5.2d, v0.2d
	WORD   $0x6e60dcc6 // fmul v6.2d, v6.2d, v0.2d
	WORD   $0x0e616861 // fcvtn v1.2s, v3.2d
	WORD   $0x4e616881 // fcvtn2 v1.4s, v4.2d
	WORD   $0x0e6168a2 // fcvtn v2.2s, v5.2d
	WORD   $0x4e6168c2 // fcvtn2 v2.4s, v6.2d
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $1, R3, R3
	BNE    loop8

tail:
	CBZ    R2, done
	FMOVS  (R1), F1
	FCVTSD F1, F1
	FMULD  F0, F1, F1
	FCVTDS F1, F1
	FMOVS  F1, (R0)
	ADD    $4, R1, R1
	ADD    $4, R0, R0
	SUBS   $1, R2, R2
	B      tail

done:
	RET
