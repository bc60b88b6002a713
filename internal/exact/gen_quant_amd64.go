//go:build ignore

// gen_quant_amd64.go writes quant_amd64.s: go run gen_quant_amd64.go
//
// The kernels over compressed rows (quant_kernels.go), in the style of
// gen_amd64.go: each (row, query) pair owns one vector accumulator, fed one
// 64-byte chunk of codes at a time, and the lanes are reduced by one fixed
// tree; four rows per group, times a few queries in the batch panel.
// Compressed rows are padded to whole chunks (CodeStride), so there is no
// tail case. Three instruction sets:
//
//   - AVX-512 (zmm, four queries a panel). int8: VPDPBUSD (VNNI)
//     multiplies the unsigned row bytes (codes offset by 128) by the signed
//     query codes, four products per int32 lane, 64 a chunk. float16:
//     VCVTPH2PS widens 16 halves (exactly) and VFMADD231PS fuses them with
//     the float32 query.
//   - AVX-VNNI (ymm): the same VPDPBUSD in its VEX form, for int8 only.
//   - AVX2 (ymm). int8: both sides split into 16-bit halves and VPMADDWD
//     (never VPMADDUBSW, whose 16-bit sums saturate); float16: F16C's
//     VCVTPH2PS and FMA.
//
// Integer sums are exact, so every int8 kernel returns the generic
// kernel's bits whatever its order. Float16 sums round in each kernel's own
// order, which the bounds allow (quant_bounds.go: any order of m fused or
// unfused multiply-adds is within γ_m); within one set the rows kernel and
// the panel sum every pair in the same order, so a batch scans with the
// very sums a single query does.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

var out bytes.Buffer

func emit(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
func ins(format string, args ...any)  { emit("\t"+format, args...) }

var rowPtr = []string{"DX", "BX", "R13", "R14"}
var qPtr = []string{"SI", "R9", "R10", "R11"}

// reduce4 sums the lanes of Z<a>..Z<a+3> into the four lanes of X<a>, in
// that order; integer or float lanes.
func reduce4(a int, integer bool) {
	ext4 := "VEXTRACTF64X4"
	add := "VADDPS"
	if integer {
		ext4, add = "VEXTRACTI64X4", "VPADDD"
	}
	for k := a; k < a+4; k++ {
		ins("%s $1, Z%d, Y26", ext4, k)
		ins("%s Y26, Y%d, Y%d", add, k, k)
	}
	reduce4Y(a, integer)
}

// reduce4Y sums the lanes of Y<a>..Y<a+3> into the four lanes of X<a>, in
// that order: the tail of reduce4, and the whole reduction of the AVX2
// kernels (VEX only, so registers below 16).
func reduce4Y(a int, integer bool) {
	add, hadd, ext := "VADDPS", "VHADDPS", "VEXTRACTF128"
	if integer {
		add, hadd, ext = "VPADDD", "VPHADDD", "VEXTRACTI128"
	}
	ins("%s Y%d, Y%d, Y%d", hadd, a+1, a, a)
	ins("%s Y%d, Y%d, Y%d", hadd, a+3, a+2, a+2)
	ins("%s Y%d, Y%d, Y%d", hadd, a+2, a, a)
	ins("%s $1, Y%d, X%d", ext, a, a+1)
	ins("%s X%d, X%d, X%d", add, a+1, a, a)
}

// i8Rows: func i8RowsVNNI(dst *int32, q *int8, rows *uint8, stride, n, groups int)
// dst[4g+r] = Σ_t q[t]·row_{4g+r}[t]; stride and n in bytes, n a multiple
// of 64.
func i8Rows() {
	name := "i8RowsVNNI"
	emit("")
	emit("// func %s(dst *int32, q *int8, rows *uint8, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("LEAQ (R8)(R8*2), R9")
	ins("MOVQ n+32(FP), R12")
	ins("SHRQ $6, R12")
	ins("MOVQ groups+40(FP), R10")
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (DX)(R8*2), R13")
	ins("LEAQ (DX)(R9*1), R14")
	for r := 0; r < 4; r++ {
		ins("VPXORD Z%d, Z%d, Z%d", r, r, r)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	ins("VMOVDQU64 (SI)(AX*1), Z16")
	for r := 0; r < 4; r++ {
		ins("VMOVDQU64 (%s)(AX*1), Z%d", rowPtr[r], 17+r)
		ins("VPDPBUSD Z16, Z%d, Z%d", 17+r, r)
	}
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	reduce4(0, true)
	ins("VMOVDQU X0, (DI)")
	ins("ADDQ $16, DI")
	ins("LEAQ (DX)(R8*4), DX")
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// i8Panel: func i8Panel4x4VNNI(dst *int32, ldd int, qs *int8, qstride int,
// rows *uint8, rstride, n, groups int)
// dst[j*ldd+r] = Σ_t q_j[t]·row_r[t] for r < 4, j < 4*groups. Four rows stay
// in L1 while groups of four queries stream past; accumulator of (query j,
// row r) is Z(4j+r). Strides and n in bytes.
func i8Panel() {
	name := "i8Panel4x4VNNI"
	emit("")
	emit("// func %s(dst *int32, ldd int, qs *int8, qstride int, rows *uint8, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $8-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), CX")
	for r := 1; r < 4; r++ {
		ins("LEAQ (%s)(CX*1), %s", rowPtr[r-1], rowPtr[r])
	}
	ins("MOVQ qstride+24(FP), R8")
	ins("MOVQ n+48(FP), R12")
	ins("SHRQ $6, R12")
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	emit("group_%s:", name)
	for j := 1; j < 4; j++ {
		ins("LEAQ (%s)(R8*1), %s", qPtr[j-1], qPtr[j])
	}
	for a := 0; a < 16; a++ {
		ins("VPXORD Z%d, Z%d, Z%d", a, a, a)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for j := 0; j < 4; j++ {
		ins("VMOVDQU64 (%s)(AX*1), Z%d", qPtr[j], 16+j)
	}
	for r := 0; r < 4; r++ {
		ins("VMOVDQU64 (%s)(AX*1), Z24", rowPtr[r])
		for j := 0; j < 4; j++ {
			ins("VPDPBUSD Z%d, Z24, Z%d", 16+j, 4*j+r)
		}
	}
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX")
	ins("LEAQ (CX)(CX*2), AX")
	dsts := []string{"(DI)", "(DI)(CX*1)", "(DI)(CX*2)", "(DI)(AX*1)"}
	for j := 0; j < 4; j++ {
		reduce4(4*j, true)
		ins("VMOVDQU X%d, %s", 4*j, dsts[j])
	}
	ins("LEAQ (DI)(CX*4), DI")
	ins("LEAQ (SI)(R8*4), SI")
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// f16Rows: func f16RowsAVX512(dst, q *float32, rows *uint16, stride, n, groups int)
// dst[4g+r] = Σ_t q[t]·half(row_{4g+r}[t]) in float32; stride and n in
// halves, n a multiple of 16.
func f16Rows() {
	name := "f16RowsAVX512"
	emit("")
	emit("// func %s(dst, q *float32, rows *uint16, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("SHLQ $1, R8")
	ins("LEAQ (R8)(R8*2), R9")
	ins("MOVQ n+32(FP), R12")
	ins("SHRQ $4, R12")
	ins("MOVQ groups+40(FP), R10")
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (DX)(R8*2), R13")
	ins("LEAQ (DX)(R9*1), R14")
	for r := 0; r < 4; r++ {
		ins("VXORPS Z%d, Z%d, Z%d", r, r, r)
	}
	ins("XORQ AX, AX")
	ins("XORQ R11, R11")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	ins("VMOVUPS (SI)(R11*1), Z16")
	for r := 0; r < 4; r++ {
		ins("VCVTPH2PS (%s)(AX*1), Z%d", rowPtr[r], 17+r)
		ins("VFMADD231PS Z%d, Z16, Z%d", 17+r, r)
	}
	ins("ADDQ $32, AX")
	ins("ADDQ $64, R11")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	reduce4(0, false)
	ins("VMOVUPS X0, (DI)")
	ins("ADDQ $16, DI")
	ins("LEAQ (DX)(R8*4), DX")
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// f16Panel: func f16Panel4x4AVX512(dst *float32, ldd int, qs *float32,
// qstride int, rows *uint16, rstride, n, groups int)
// dst[j*ldd+r] = Σ_t q_j[t]·half(row_r[t]) for r < 4, j < 4*groups: the
// int8 panel's shape, each row chunk widened once for four queries.
// Strides and n in components; AX walks the rows' bytes and the queries
// are addressed at twice it.
func f16Panel() {
	name := "f16Panel4x4AVX512"
	emit("")
	emit("// func %s(dst *float32, ldd int, qs *float32, qstride int, rows *uint16, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $8-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), CX")
	ins("SHLQ $1, CX")
	for r := 1; r < 4; r++ {
		ins("LEAQ (%s)(CX*1), %s", rowPtr[r-1], rowPtr[r])
	}
	ins("MOVQ qstride+24(FP), R8")
	ins("SHLQ $2, R8")
	ins("MOVQ n+48(FP), R12")
	ins("SHRQ $4, R12")
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	emit("group_%s:", name)
	for j := 1; j < 4; j++ {
		ins("LEAQ (%s)(R8*1), %s", qPtr[j-1], qPtr[j])
	}
	for a := 0; a < 16; a++ {
		ins("VXORPS Z%d, Z%d, Z%d", a, a, a)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for j := 0; j < 4; j++ {
		ins("VMOVUPS (%s)(AX*2), Z%d", qPtr[j], 16+j)
	}
	for r := 0; r < 4; r++ {
		ins("VCVTPH2PS (%s)(AX*1), Z24", rowPtr[r])
		for j := 0; j < 4; j++ {
			ins("VFMADD231PS Z24, Z%d, Z%d", 16+j, 4*j+r)
		}
	}
	ins("ADDQ $32, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX")
	ins("LEAQ (CX)(CX*2), AX")
	dsts := []string{"(DI)", "(DI)(CX*1)", "(DI)(CX*2)", "(DI)(AX*1)"}
	for j := 0; j < 4; j++ {
		reduce4(4*j, false)
		ins("VMOVUPS X%d, %s", 4*j, dsts[j])
	}
	ins("LEAQ (DI)(CX*4), DI")
	ins("LEAQ (SI)(R8*4), SI")
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// The AVX2 kernels: VEX encodings only, so sixteen Y registers, eight int32
// or float32 lanes an accumulator. The batch panels hold four rows against
// two queries (eight accumulators), as the float32 AVX2 panel does. Every
// (row, query) pair still owns one accumulator, fed in the rows kernel's
// order and reduced by reduce4Y, so a pair's sum is the same bits in the
// rows kernel and in the panel.

// vpdpbusd emits the VEX (AVX-VNNI) VPDPBUSD Y<acc> += Σ₄ unsigned bytes
// of Y<u> × signed bytes of Y<s>, by hand: the Go assembler knows only the
// EVEX form, which needs AVX-512 VL on the CPU. VEX.256.66.0F38.W0 50 /r
// with ModRM.reg = acc, VEX.vvvv = u, ModRM.rm = s (registers only).
func vpdpbusd(acc, u, s int) {
	b1 := 0xE2 // R̄ X̄ B̄ set, map 0F38
	if acc >= 8 {
		b1 &^= 0x80
	}
	if s >= 8 {
		b1 &^= 0x20
	}
	b2 := (15-u)<<3 | 0x05 // W0, v̄vvv, L=256, pp=66
	modrm := 0xC0 | (acc&7)<<3 | s&7
	ins("BYTE $0xC4; BYTE $0x%02X; BYTE $0x%02X; BYTE $0x50; BYTE $0x%02X // VPDPBUSD Y%d, Y%d, Y%d (VEX)", b1, b2, modrm, s, u, acc)
}

// i8Step emits one 32-byte step of an int8 AVX2 kernel at displacement
// off: the queries' codes (signed bytes, at off(qp[j])(AX*1)) split into
// sign-extended even and odd 16-bit halves, each row (unsigned bytes) into
// zero-extended even and odd halves (mask Y15 = 0x00FF words), and
// VPMADDWD multiplies 16-bit pairs into 32-bit sums that VPADDD adds to
// the accumulator Y<acc(j, r)>. A product is at most 255·127 in size and a
// pair 64,770, far inside int32, so nothing saturates: the sums are exact,
// unlike VPMADDUBSW's, whose 16-bit pair sums saturate at 32,767.
// Registers: q even Y<qe[j]>, odd Y<qe[j]+1>; row halves Y<rt[r]>,
// Y<rt[r]+1>; products into the two of tmp(r) (which may be one).
func i8Step(off int, qp []string, qe []int, rows []string, rt []int, acc func(j, r int) int, tmp func(r int) (int, int)) {
	for j := range qp {
		e, o := qe[j], qe[j]+1
		ins("VMOVDQU %d(%s)(AX*1), Y%d", off, qp[j], o)
		ins("VPSLLW $8, Y%d, Y%d", o, e)
		ins("VPSRAW $8, Y%d, Y%d", e, e)
		ins("VPSRAW $8, Y%d, Y%d", o, o)
	}
	for r := range rows {
		lo, hi := rt[r], rt[r]+1
		ins("VMOVDQU %d(%s)(AX*1), Y%d", off, rows[r], lo)
		ins("VPSRLW $8, Y%d, Y%d", lo, hi)
		ins("VPAND Y15, Y%d, Y%d", lo, lo)
		for j := range qp {
			t0, t1 := tmp(r)
			a := acc(j, r)
			ins("VPMADDWD Y%d, Y%d, Y%d", qe[j], lo, t0)
			ins("VPADDD Y%d, Y%d, Y%d", t0, a, a)
			ins("VPMADDWD Y%d, Y%d, Y%d", qe[j]+1, hi, t1)
			ins("VPADDD Y%d, Y%d, Y%d", t1, a, a)
		}
	}
}

// i8RowsYmm: func i8RowsAVX2 / i8RowsAVXVNNI(dst *int32, q *int8, rows
// *uint8, stride, n, groups int): i8Rows with eight-lane accumulators, n a
// multiple of 64.
func i8RowsYmm(vnni bool) {
	name := "i8RowsAVX2"
	if vnni {
		name = "i8RowsAVXVNNI"
	}
	emit("")
	emit("// func %s(dst *int32, q *int8, rows *uint8, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("LEAQ (R8)(R8*2), R9")
	ins("MOVQ n+32(FP), R12")
	ins("SHRQ $6, R12")
	ins("MOVQ groups+40(FP), R10")
	if !vnni {
		ins("VPCMPEQW Y15, Y15, Y15")
		ins("VPSRLW $8, Y15, Y15")
	}
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (DX)(R8*2), R13")
	ins("LEAQ (DX)(R9*1), R14")
	for r := 0; r < 4; r++ {
		ins("VPXOR Y%d, Y%d, Y%d", r, r, r)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for off := 0; off < 64; off += 32 {
		if vnni {
			ins("VMOVDQU %d(SI)(AX*1), Y4", off)
			for r := 0; r < 4; r++ {
				ins("VMOVDQU %d(%s)(AX*1), Y%d", off, rowPtr[r], 5+r)
				vpdpbusd(r, 5+r, 4)
			}
			continue
		}
		i8Step(off, []string{"SI"}, []int{4}, rowPtr, []int{6, 8, 10, 12},
			func(j, r int) int { return r }, func(r int) (int, int) { return 6 + 2*r, 7 + 2*r })
	}
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	reduce4Y(0, true)
	ins("VMOVDQU X0, (DI)")
	ins("ADDQ $16, DI")
	ins("LEAQ (DX)(R8*4), DX")
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// i8PanelYmm: func i8Panel2x4AVX2 / i8Panel3x4AVXVNNI(dst *int32, ldd
// int, qs *int8, qstride int, rows *uint8, rstride, n, groups int):
// dst[j*ldd+r] for r < 4, j < nq*groups; the accumulator of (query j, row
// r) is Y(4j+r). AVX2 holds two queries (each split in two registers),
// AVX-VNNI three.
func i8PanelYmm(vnni bool) {
	name, nq := "i8Panel2x4AVX2", 2
	if vnni {
		name, nq = "i8Panel3x4AVXVNNI", 3
	}
	emit("")
	emit("// func %s(dst *int32, ldd int, qs *int8, qstride int, rows *uint8, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $8-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), CX")
	for r := 1; r < 4; r++ {
		ins("LEAQ (%s)(CX*1), %s", rowPtr[r-1], rowPtr[r])
	}
	ins("MOVQ qstride+24(FP), R8")
	ins("MOVQ n+48(FP), R12")
	ins("SHRQ $6, R12")
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	if !vnni {
		ins("VPCMPEQW Y15, Y15, Y15")
		ins("VPSRLW $8, Y15, Y15")
	}
	emit("group_%s:", name)
	for j := 1; j < nq; j++ {
		ins("LEAQ (%s)(R8*1), %s", qPtr[j-1], qPtr[j])
	}
	for a := 0; a < 4*nq; a++ {
		ins("VPXOR Y%d, Y%d, Y%d", a, a, a)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for off := 0; off < 64; off += 32 {
		if vnni {
			for j := 0; j < nq; j++ {
				ins("VMOVDQU %d(%s)(AX*1), Y%d", off, qPtr[j], 12+j)
			}
			for r := 0; r < 4; r++ {
				ins("VMOVDQU %d(%s)(AX*1), Y15", off, rowPtr[r])
				for j := 0; j < nq; j++ {
					vpdpbusd(4*j+r, 15, 12+j)
				}
			}
			continue
		}
		i8Step(off, qPtr[:2], []int{8, 10}, rowPtr, []int{12, 12, 12, 12},
			func(j, r int) int { return 4*j + r }, func(int) (int, int) { return 14, 14 })
	}
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX")
	dsts := []string{"(DI)", "(DI)(CX*1)", "(DI)(CX*2)"}
	for j := 0; j < nq; j++ {
		reduce4Y(4*j, true)
		ins("VMOVDQU X%d, %s", 4*j, dsts[j])
	}
	ins("LEAQ (CX)(CX*%d), AX", nq-1)
	ins("ADDQ AX, DI")
	ins("LEAQ (R8)(R8*%d), AX", nq-1)
	ins("ADDQ AX, SI")
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// i8PanelWide: func i8Panel4x3AVX2(dst *int32, ldd int, qs *int16, qstride
// int, rows *uint8, rstride, n, groups int): the AVX2 int8 batch panel,
// shaped like a matrix product. The queries come already widened to
// int16 (once a batch, by the caller), so a step spends nothing on them:
// each 16 bytes of three rows are zero-extended to words (VPMOVZXBW from
// memory, three instructions), and every (row, query) pair takes one
// VPMADDWD with the query's words straight from memory and one VPADDD
// into its accumulator: 27 instructions for 192 products, where the
// 2 × 4 panel that split both sides every step spent 52 for 256. Twelve
// accumulators (query j, row r in Y(4r+j)), three widened rows, one
// product: the sixteen Y registers. The four queries stay put (6 KiB at
// dimension 768, in L1) while the groups of three rows stream past:
// dst[j*ldd+r] for j < 4, r < 3*groups; qstride in int16 elements, n in
// bytes (a multiple of 64). A VPMADDWD pair is at most 2·255·127, and a
// row of at most 65,536 bytes sums within int32: the sums are exact, the
// generic kernel's.
func i8PanelWide() {
	name := "i8Panel4x3AVX2"
	emit("")
	emit("// func %s(dst *int32, ldd int, qs *int16, qstride int, rows *uint8, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $8-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ qstride+24(FP), R8")
	ins("SHLQ $1, R8") // bytes a query
	ins("LEAQ (SI)(R8*1), R9")
	ins("LEAQ (R9)(R8*1), R10")
	ins("LEAQ (R10)(R8*1), R11")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), R8") // from here on the rows' stride
	ins("MOVQ n+48(FP), R12")
	ins("SHRQ $6, R12")
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	rowRegs := []string{"DX", "BX", "R13"}
	qRegs := []string{"SI", "R9", "R10", "R11"}
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (BX)(R8*1), R13")
	for a := 0; a < 12; a++ {
		ins("VPXOR Y%d, Y%d, Y%d", a, a, a)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for off := 0; off < 64; off += 16 {
		for r, rr := range rowRegs {
			ins("VPMOVZXBW %d(%s)(AX*1), Y%d", off, rr, 12+r)
		}
		for j, qr := range qRegs {
			for r := range rowRegs {
				ins("VPMADDWD %d(%s)(AX*2), Y%d, Y15", 2*off, qr, 12+r)
				ins("VPADDD Y15, Y%d, Y%d", 4*r+j, 4*r+j)
			}
		}
	}
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX") // bytes a query's row of dst
	ins("LEAQ (DI)(CX*2), R14")
	for r := 0; r < 3; r++ {
		reduce4Y(4*r, true) // X(4r) = the four queries' sums for row r
		ins("VMOVD X%d, %d(DI)", 4*r, 4*r)
		ins("VPEXTRD $1, X%d, %d(DI)(CX*1)", 4*r, 4*r)
		ins("VPEXTRD $2, X%d, %d(R14)", 4*r, 4*r)
		ins("VPEXTRD $3, X%d, %d(R14)(CX*1)", 4*r, 4*r)
	}
	ins("ADDQ $12, DI")
	ins("LEAQ (R13)(R8*1), DX") // the next three rows
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// i8Pass: func i8PassAVX2(scale *float32, raw *int32, n int, off int32,
// theta float64) int: the first i < n, a multiple of 8 rows on, at which
// float64(scale[i])·float64(raw[i]−off) is not below theta, or where
// fewer than 8 rows are left (the caller checks from there), eight rows
// at a time: scanI8Dot's first test, which rejects nearly every row of a
// batch's sums. The products are the scalar test's to the bit (both
// conversions exact, one rounding each), and NLT keeps what the scalar
// comparison keeps.
func i8Pass() {
	name := "i8PassAVX2"
	emit("")
	emit("// func %s(scale *float32, raw *int32, n int, off int32, theta float64) int", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ scale+0(FP), SI")
	ins("MOVQ raw+8(FP), DI")
	ins("MOVQ n+16(FP), CX")
	ins("MOVL off+24(FP), BX")
	ins("VMOVD BX, X5")
	ins("VPBROADCASTD X5, Y5")
	ins("VBROADCASTSD theta+32(FP), Y6")
	ins("XORQ AX, AX")
	emit("loop_%s:", name)
	ins("MOVQ CX, DX")
	ins("SUBQ AX, DX")
	ins("CMPQ DX, $8")
	ins("JLT done_%s", name)
	ins("VMOVDQU (DI)(AX*4), Y0")
	ins("VPSUBD Y5, Y0, Y0")
	ins("VCVTDQ2PD X0, Y1")
	ins("VEXTRACTI128 $1, Y0, X2")
	ins("VCVTDQ2PD X2, Y2")
	ins("VCVTPS2PD (SI)(AX*4), Y3")
	ins("VCVTPS2PD 16(SI)(AX*4), Y4")
	ins("VMULPD Y3, Y1, Y1")
	ins("VMULPD Y4, Y2, Y2")
	ins("VCMPPD $5, Y6, Y1, Y1") // NLT: not below theta
	ins("VCMPPD $5, Y6, Y2, Y2")
	ins("VMOVMSKPD Y1, BX")
	ins("VMOVMSKPD Y2, R8")
	ins("SHLQ $4, R8")
	ins("ORQ R8, BX")
	ins("TESTQ BX, BX")
	ins("JNZ found_%s", name)
	ins("ADDQ $8, AX")
	ins("JMP loop_%s", name)
	emit("found_%s:", name)
	ins("BSFQ BX, BX")
	ins("ADDQ BX, AX")
	emit("done_%s:", name)
	ins("MOVQ AX, ret+40(FP)")
	ins("VZEROUPPER")
	ins("RET")
}

// f16RowsAVX2: func f16RowsAVX2(dst, q *float32, rows *uint16, stride, n,
// groups int): f16Rows with eight-lane accumulators (VCVTPH2PS from F16C
// widens eight halves exactly, VFMADD231PS from FMA), n a multiple of 16.
func f16RowsAVX2() {
	name := "f16RowsAVX2"
	emit("")
	emit("// func %s(dst, q *float32, rows *uint16, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("SHLQ $1, R8")
	ins("LEAQ (R8)(R8*2), R9")
	ins("MOVQ n+32(FP), R12")
	ins("SHRQ $4, R12")
	ins("MOVQ groups+40(FP), R10")
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (DX)(R8*2), R13")
	ins("LEAQ (DX)(R9*1), R14")
	for r := 0; r < 4; r++ {
		ins("VXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for h := 0; h < 2; h++ {
		ins("VMOVUPS %d(SI)(AX*2), Y4", 32*h)
		for r := 0; r < 4; r++ {
			ins("VCVTPH2PS %d(%s)(AX*1), Y%d", 16*h, rowPtr[r], 5+r)
			ins("VFMADD231PS Y%d, Y4, Y%d", 5+r, r)
		}
	}
	ins("ADDQ $32, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	reduce4Y(0, false)
	ins("VMOVUPS X0, (DI)")
	ins("ADDQ $16, DI")
	ins("LEAQ (DX)(R8*4), DX")
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// f16PanelAVX2: func f16Panel<nq>x4AVX2(dst *float32, ldd int, qs
// *float32, qstride int, rows *uint16, rstride, n, groups int):
// f16RowsAVX2's order for four rows against nq queries (accumulator of
// query j, row r: Y(4j+r); queries in Y(4nq+j)), each row chunk widened
// once.
func f16PanelAVX2(nq int) {
	name := fmt.Sprintf("f16Panel%dx4AVX2", nq)
	emit("")
	emit("// func %s(dst *float32, ldd int, qs *float32, qstride int, rows *uint16, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $8-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), CX")
	ins("SHLQ $1, CX")
	for r := 1; r < 4; r++ {
		ins("LEAQ (%s)(CX*1), %s", rowPtr[r-1], rowPtr[r])
	}
	ins("MOVQ qstride+24(FP), R8")
	ins("SHLQ $2, R8")
	ins("MOVQ n+48(FP), R12")
	ins("SHRQ $4, R12")
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	emit("group_%s:", name)
	for j := 1; j < nq; j++ {
		ins("LEAQ (%s)(R8*1), %s", qPtr[j-1], qPtr[j])
	}
	for a := 0; a < 4*nq; a++ {
		ins("VXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	row := 4*nq + nq
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ reduce_%s", name)
	emit("chunk_%s:", name)
	for h := 0; h < 2; h++ {
		for j := 0; j < nq; j++ {
			ins("VMOVUPS %d(%s)(AX*2), Y%d", 32*h, qPtr[j], 4*nq+j)
		}
		for r := 0; r < 4; r++ {
			ins("VCVTPH2PS %d(%s)(AX*1), Y%d", 16*h, rowPtr[r], row)
			for j := 0; j < nq; j++ {
				ins("VFMADD231PS Y%d, Y%d, Y%d", row, 4*nq+j, 4*j+r)
			}
		}
	}
	ins("ADDQ $32, AX")
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX")
	dsts := []string{"(DI)", "(DI)(CX*1)", "(DI)(CX*2)"}
	for j := 0; j < nq; j++ {
		reduce4Y(4*j, false)
		ins("VMOVUPS X%d, %s", 4*j, dsts[j])
	}
	ins("LEAQ (CX)(CX*%d), AX", nq-1)
	ins("ADDQ AX, DI")
	ins("LEAQ (R8)(R8*%d), AX", nq-1)
	ins("ADDQ AX, SI")
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

func main() {
	emit("// Code generated by gen_quant_amd64.go; DO NOT EDIT.")
	emit("")
	emit("//go:build amd64 && !purego")
	emit("")
	emit(`#include "textflag.h"`)
	i8Rows()
	i8Panel()
	f16Rows()
	f16Panel()
	i8RowsYmm(false)
	i8PanelWide()
	i8RowsYmm(true)
	i8PanelYmm(true)
	f16RowsAVX2()
	f16PanelAVX2(3)
	i8Pass()
	if err := os.WriteFile("quant_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
