//go:build amd64 && !purego

#include "textflag.h"

// func scaleAVX2(dst, src *float32, n int, inv float64)
//
// dst[i] = float32(float64(src[i]) * inv) for i < n, eight at a time:
// VCVTPS2PD is exact, VMULPD rounds each product once as MULSD does, and
// VCVTPD2PS rounds to float32 under the same MXCSR mode as CVTSD2SS, so the
// result is bit for bit what the Go loop computes.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD inv+24(FP), Y0
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-8, DX

loop8:
	CMPQ AX, DX
	JGE  tail
	VCVTPS2PD (SI)(AX*4), Y1
	VCVTPS2PD 16(SI)(AX*4), Y2
	VMULPD    Y0, Y1, Y1
	VMULPD    Y0, Y2, Y2
	VCVTPD2PSY Y1, X1
	VCVTPD2PSY Y2, X2
	VMOVUPS   X1, (DI)(AX*4)
	VMOVUPS   X2, 16(DI)(AX*4)
	ADDQ      $8, AX
	JMP       loop8

tail:
	CMPQ AX, CX
	JGE  done
	VCVTSS2SD (SI)(AX*4), X1, X1
	VMULSD    X0, X1, X1
	VCVTSD2SS X1, X1, X1
	VMOVSS    X1, (DI)(AX*4)
	INCQ      AX
	JMP       tail

done:
	VZEROUPPER
	RET
