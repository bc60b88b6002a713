//go:build amd64 && !purego

#include "textflag.h"

// func sumLanesAVX2(acc *[32]float64, v *float32, n int)
//
// acc[j%32] += float64(v[j])² for j < n (n a multiple of 32), in order
// within each of the 32 sums, as sumLanesGo does: eight registers of four
// sums, Y0 holding sums 0–3, Y1 4–7, … Y7 28–31. VCVTPS2PD is exact and
// so is the square, so VMULPD then VADDPD rounds once per addition, as the
// Go loop does.
TEXT ·sumLanesAVX2(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVUPD 128(DI), Y4
	VMOVUPD 160(DI), Y5
	VMOVUPD 192(DI), Y6
	VMOVUPD 224(DI), Y7
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  done
	VCVTPS2PD 0(SI)(AX*4), Y8
	VCVTPS2PD 16(SI)(AX*4), Y9
	VCVTPS2PD 32(SI)(AX*4), Y10
	VCVTPS2PD 48(SI)(AX*4), Y11
	VMULPD    Y8, Y8, Y8
	VMULPD    Y9, Y9, Y9
	VMULPD    Y10, Y10, Y10
	VMULPD    Y11, Y11, Y11
	VADDPD    Y8, Y0, Y0
	VADDPD    Y9, Y1, Y1
	VADDPD    Y10, Y2, Y2
	VADDPD    Y11, Y3, Y3
	VCVTPS2PD 64(SI)(AX*4), Y12
	VCVTPS2PD 80(SI)(AX*4), Y13
	VCVTPS2PD 96(SI)(AX*4), Y14
	VCVTPS2PD 112(SI)(AX*4), Y15
	VMULPD    Y12, Y12, Y12
	VMULPD    Y13, Y13, Y13
	VMULPD    Y14, Y14, Y14
	VMULPD    Y15, Y15, Y15
	VADDPD    Y12, Y4, Y4
	VADDPD    Y13, Y5, Y5
	VADDPD    Y14, Y6, Y6
	VADDPD    Y15, Y7, Y7
	ADDQ      $32, AX
	JMP       loop

done:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 128(DI)
	VMOVUPD Y5, 160(DI)
	VMOVUPD Y6, 192(DI)
	VMOVUPD Y7, 224(DI)
	VZEROUPPER
	RET
