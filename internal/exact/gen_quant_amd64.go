//go:build ignore

// gen_quant_amd64.go writes quant_amd64.s: go run gen_quant_amd64.go
//
// The kernels over compressed rows (quant_kernels.go), in the style of
// gen_amd64.go: each (row, query) pair owns one vector accumulator, fed one
// 64-byte chunk of codes at a time, and the lanes are reduced by one fixed
// tree; four rows per group, times four queries in the batch panel.
// Compressed rows are padded to whole chunks (CodeStride), so there is no
// tail case.
//
//   - int8: VPDPBUSD multiplies the unsigned row bytes (codes offset by
//     128) by the signed query codes, four products per int32 lane, 64 a
//     chunk. Integer sums are exact, so the result is the generic kernel's
//     to the bit whatever the order.
//   - float16: VCVTPH2PS widens 16 halves (exactly) and VFMADD231PS fuses
//     them with the float32 query.
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
	add, hadd, ext := "VADDPS", "VHADDPS", "VEXTRACTF128"
	ext4 := "VEXTRACTF64X4"
	if integer {
		add, hadd, ext, ext4 = "VPADDD", "VPHADDD", "VEXTRACTI128", "VEXTRACTI64X4"
	}
	for k := a; k < a+4; k++ {
		ins("%s $1, Z%d, Y26", ext4, k)
		ins("%s Y26, Y%d, Y%d", add, k, k)
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
	if err := os.WriteFile("quant_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
