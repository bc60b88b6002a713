//go:build arm64 && !purego

#include "textflag.h"

// func sumLanesNEON(acc *[32]float64, v *float32, n int)
//
// acc[j%32] += float64(v[j])² for j < n (n a multiple of 32), in order
// within each of the 32 sums, as sumLanesGo does: sixteen registers of two
// sums, V0 holding sums 0–1, V1 2–3, … V15 30–31. FCVTL widens exactly and
// the square of a float32 is exact in float64, so the fused VFMLA rounds
// once per addition, as the Go loop does (fused or not). Go's assembler
// lacks FCVTL/FCVTL2; their WORD encodings were checked with
// llvm-mc -triple=aarch64 -show-encoding.
TEXT ·sumLanesNEON(SB), NOSPLIT, $0-24
	MOVD acc+0(FP), R0
	MOVD v+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $5, R2, R2
	MOVD R0, R3
	VLD1.P 64(R3), [V0.D2, V1.D2, V2.D2, V3.D2]
	VLD1.P 64(R3), [V4.D2, V5.D2, V6.D2, V7.D2]
	VLD1.P 64(R3), [V8.D2, V9.D2, V10.D2, V11.D2]
	VLD1   (R3), [V12.D2, V13.D2, V14.D2, V15.D2]
	CBZ  R2, done

loop:
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	WORD $0x0e617a14 // fcvtl v20.2d, v16.2s
	WORD $0x4e617a15 // fcvtl2 v21.2d, v16.4s
	WORD $0x0e617a36 // fcvtl v22.2d, v17.2s
	WORD $0x4e617a37 // fcvtl2 v23.2d, v17.4s
	WORD $0x0e617a58 // fcvtl v24.2d, v18.2s
	WORD $0x4e617a59 // fcvtl2 v25.2d, v18.4s
	WORD $0x0e617a7a // fcvtl v26.2d, v19.2s
	WORD $0x4e617a7b // fcvtl2 v27.2d, v19.4s
	VFMLA V20.D2, V20.D2, V0.D2
	VFMLA V21.D2, V21.D2, V1.D2
	VFMLA V22.D2, V22.D2, V2.D2
	VFMLA V23.D2, V23.D2, V3.D2
	VFMLA V24.D2, V24.D2, V4.D2
	VFMLA V25.D2, V25.D2, V5.D2
	VFMLA V26.D2, V26.D2, V6.D2
	VFMLA V27.D2, V27.D2, V7.D2
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	WORD $0x0e617a14 // fcvtl v20.2d, v16.2s
	WORD $0x4e617a15 // fcvtl2 v21.2d, v16.4s
	WORD $0x0e617a36 // fcvtl v22.2d, v17.2s
	WORD $0x4e617a37 // fcvtl2 v23.2d, v17.4s
	WORD $0x0e617a58 // fcvtl v24.2d, v18.2s
	WORD $0x4e617a59 // fcvtl2 v25.2d, v18.4s
	WORD $0x0e617a7a // fcvtl v26.2d, v19.2s
	WORD $0x4e617a7b // fcvtl2 v27.2d, v19.4s
	VFMLA V20.D2, V20.D2, V8.D2
	VFMLA V21.D2, V21.D2, V9.D2
	VFMLA V22.D2, V22.D2, V10.D2
	VFMLA V23.D2, V23.D2, V11.D2
	VFMLA V24.D2, V24.D2, V12.D2
	VFMLA V25.D2, V25.D2, V13.D2
	VFMLA V26.D2, V26.D2, V14.D2
	VFMLA V27.D2, V27.D2, V15.D2
	SUBS $1, R2, R2
	BNE  loop

done:
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(R0)
	VST1.P [V4.D2, V5.D2, V6.D2, V7.D2], 64(R0)
	VST1.P [V8.D2, V9.D2, V10.D2, V11.D2], 64(R0)
	VST1   [V12.D2, V13.D2, V14.D2, V15.D2], (R0)
	RET
