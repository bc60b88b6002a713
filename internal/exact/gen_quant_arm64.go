//go:build ignore

// gen_quant_arm64.go writes quant_arm64.s: go run gen_quant_arm64.go
//
// The NEON kernels over compressed rows (quant_kernels.go), in the style
// of gen_quant_amd64.go: four rows per group, times a group of queries in
// the batch panel. The wrappers in quant_arm64.go hand them whole 16-byte
// chunks.
//
//   - int8: NEON has no unsigned-by-signed byte product below Armv8.6, so
//     each row byte u (code c offset by 128) is turned back into its code
//     by flipping the top bit (u XOR 0x80 read as a signed byte is u−128),
//     the kernels sum q·c, and the wrapper adds 128·Σq: Σ q·u = Σ q·c +
//     128·Σ q, exactly, in int32. With the Armv8.2 dot-product extension
//     SDOT multiplies four signed byte pairs into each int32 lane; without
//     it SMULL/SMULL2 form the sixteen int16 products of a chunk (exact:
//     |q·c| ≤ 128·128) and SADALP adds them in pairs, widened, into int32
//     lanes. Integer sums are exact whatever the order, so every kernel
//     returns the generic kernel's bits.
//   - float16: FCVTL/FCVTL2 widen eight halves (exactly; base Armv8.0
//     Advanced SIMD, no FP16 arithmetic extension needed) and VFMLA fuses
//     them with the float32 query. As in fallback/gen_arm64.go a pair owns
//     eight lanes in two registers (A: halves 8c..8c+3, B: 8c+4..8c+7),
//     folded as (A+B) by one pairwise tree, so the rows and panel kernels
//     agree bit for bit; quant_bounds.go's bound holds for any order.
//
// Go's arm64 assembler lacks SDOT, SMULL, SMULL2, SADALP, FCVTL, FCVTL2 and
// vector FADD/FADDP; they are emitted as WORD encodings (enc below) with
// their mnemonics beside them, checked against llvm-mc -triple=aarch64
// -mattr=+dotprod -show-encoding, and the tests run them under
// qemu-aarch64 with and without the dot-product extension.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"strings"
)

var out bytes.Buffer

func emit(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
func ins(format string, args ...any)  { emit("\t"+format, args...) }

// An encoding: base opcode with Rd in bits 0–4, Rn in 5–9 and Rm in 16–20
// (Arm ARM, C7.2), and the operand arrangements for the comment.
type encoding struct {
	base     uint32
	mnemonic string
	arr      []string // d, n[, m]
}

var enc = map[string]encoding{
	"sdot":   {0x4e809400, "sdot", []string{"4s", "16b", "16b"}},   // Armv8.2 dotprod
	"smull":  {0x0e20c000, "smull", []string{"8h", "8b", "8b"}},    // low eight bytes
	"smull2": {0x4e20c000, "smull2", []string{"8h", "16b", "16b"}}, // high eight bytes
	"sadalp": {0x4e606800, "sadalp", []string{"4s", "8h"}},
	"fcvtl":  {0x0e217800, "fcvtl", []string{"4s", "4h"}},  // halves 0–3 to float32
	"fcvtl2": {0x4e217800, "fcvtl2", []string{"4s", "8h"}}, // halves 4–7 to float32
	"fadd":   {0x4e20d400, "fadd", []string{"4s", "4s", "4s"}},
	"faddp":  {0x6e20d400, "faddp", []string{"4s", "4s", "4s"}}, // pairs of Vn, then of Vm
}

// word emits op vd, vn[, vm] as a WORD.
func word(op string, regs ...int) {
	e, ok := enc[op]
	if !ok || len(regs) != len(e.arr) {
		log.Fatalf("no encoding for %s %v", op, regs)
	}
	w := e.base | uint32(regs[0]) | uint32(regs[1])<<5
	if len(regs) == 3 {
		w |= uint32(regs[2]) << 16
	}
	var ops []string
	for i, r := range regs {
		ops = append(ops, fmt.Sprintf("v%d.%s", r, e.arr[i]))
	}
	ins("WORD $0x%08x // %s %s", w, e.mnemonic, strings.Join(ops, ", "))
}

func zero(n int) { ins("VEOR V%d.B16, V%d.B16, V%d.B16", n, n, n) }

// The int8 kernels' registers: the flip constant, and the int16 product
// temporaries of the SMULL form.
const (
	flip  = 31
	prod0 = 24
)

// i8Pair adds the products of query register q and flipped row register
// c into accumulator a (SDOT), or, without dotprod, into a (low eight
// bytes) and b (high eight) through the temporaries t0, t1.
func i8Pair(dot bool, q, c, a, b, t0, t1 int) {
	if dot {
		word("sdot", a, q, c)
		return
	}
	word("smull", t0, q, c)
	word("smull2", t1, q, c)
	word("sadalp", a, t0)
	word("sadalp", b, t1)
}

// i8Reduce folds int32 lanes: V<a[r]> (plus V<b[r]> when b is non-nil)
// into the four lanes of V<a[0]>, pair r in lane r.
func i8Reduce(a []int, b []int) {
	if b != nil {
		for r := range a {
			ins("VADD V%d.S4, V%d.S4, V%d.S4", b[r], a[r], a[r])
		}
	}
	ins("VADDP V%d.S4, V%d.S4, V%d.S4", a[1], a[0], a[0])
	ins("VADDP V%d.S4, V%d.S4, V%d.S4", a[3], a[2], a[2])
	ins("VADDP V%d.S4, V%d.S4, V%d.S4", a[2], a[0], a[0])
}

func i8Suffix(dot bool) string {
	if dot {
		return "SDOT"
	}
	return "SMULL"
}

// i8RowsKernel: func name(dst *int32, q *int8, rows *uint8, stride, n, groups int)
// dst[4g+r] = Σ_t q[t]·(row[t]−128) for row 4g+r, g < groups; stride and n
// in bytes, n a multiple of 16.
//
// Row r accumulates in V<r> and V<r+4>: with SDOT the two halves of a
// 32-byte step, with SMULL the low and high bytes of each chunk. The query
// is V16–V17, row r V<20+2r> (and V<21+2r>, SDOT's second half), products
// V<21+2r> and V28–V30 (SMULL).
func i8RowsKernel(dot bool) {
	name := "i8Rows" + i8Suffix(dot)
	emit("")
	emit("// func %s(dst *int32, q *int8, rows *uint8, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD q+8(FP), R1")
	ins("MOVD rows+16(FP), R2")
	ins("MOVD stride+24(FP), R3")
	ins("MOVD n+32(FP), R4")
	ins("MOVD groups+40(FP), R5")
	ins("VMOVI $128, V%d.B16", flip)
	step := 16
	if dot {
		step = 32
	}
	emit("group_%s:", name)
	ins("MOVD R1, R8")
	ins("MOVD R2, R9")
	ins("ADD R3, R9, R10")
	ins("ADD R3, R10, R11")
	ins("ADD R3, R11, R12")
	for a := 0; a < 8; a++ {
		zero(a)
	}
	rp := []string{"R9", "R10", "R11", "R12"}
	// chunks loads and multiplies k 16-byte chunks of the query and rows.
	chunks := func(k int) {
		if k == 2 {
			ins("VLD1.P 32(R8), [V16.B16, V17.B16]")
		} else {
			ins("VLD1.P 16(R8), [V16.B16]")
		}
		for r, p := range rp {
			if k == 2 {
				ins("VLD1.P 32(%s), [V%d.B16, V%d.B16]", p, 20+2*r, 21+2*r)
			} else {
				ins("VLD1.P 16(%s), [V%d.B16]", p, 20+2*r)
			}
		}
		for r := range rp {
			for h := 0; h < k; h++ {
				c := 20 + 2*r + h
				ins("VEOR V%d.B16, V%d.B16, V%d.B16", flip, c, c)
				i8Pair(dot, 16+h, c, r+4*h, r+4, 21+2*r, 28+r%3)
			}
		}
	}
	ins("LSR $%d, R4, R17", map[int]int{16: 4, 32: 5}[step])
	ins("CBZ R17, last_%s", name)
	emit("chunk_%s:", name)
	chunks(step / 16)
	ins("SUBS $1, R17, R17")
	ins("BNE chunk_%s", name)
	emit("last_%s:", name)
	if dot {
		ins("TBZ $4, R4, reduce_%s", name)
		chunks(1)
	}
	emit("reduce_%s:", name)
	i8Reduce([]int{0, 1, 2, 3}, []int{4, 5, 6, 7})
	ins("VST1.P [V0.S4], 16(R0)")
	ins("ADD R3<<2, R2, R2")
	ins("SUBS $1, R5, R5")
	ins("BNE group_%s", name)
	ins("RET")
}

// i8PanelKernel: func name(dst *int32, ldd int, qs *int8, qstride int,
// rows *uint8, rstride, n, groups int)
// dst[j*ldd+r] = Σ_t qs[j][t]·(row r[t]−128) for r < 4, j < 4*groups.
//
// Pair (j, r) accumulates in V<4j+r>; queries V16–V19, rows V20–V23
// (flipped in place, once for four queries), products V24–V29.
func i8PanelKernel(dot bool) {
	name := "i8Panel4x4" + i8Suffix(dot)
	emit("")
	emit("// func %s(dst *int32, ldd int, qs *int8, qstride int, rows *uint8, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD ldd+8(FP), R1")
	ins("LSL $2, R1, R1")
	ins("MOVD qs+16(FP), R2")
	ins("MOVD qstride+24(FP), R3")
	ins("MOVD rows+32(FP), R4")
	ins("MOVD rstride+40(FP), R5")
	ins("MOVD n+48(FP), R6")
	ins("LSR $4, R6, R6")
	ins("MOVD groups+56(FP), R7")
	ins("VMOVI $128, V%d.B16", flip)
	emit("group_%s:", name)
	qp := []string{"R8", "R9", "R10", "R11"}
	rp := []string{"R12", "R13", "R14", "R15"}
	ins("MOVD R2, R8")
	for j := 1; j < 4; j++ {
		ins("ADD R3, %s, %s", qp[j-1], qp[j])
	}
	ins("MOVD R4, R12")
	for r := 1; r < 4; r++ {
		ins("ADD R5, %s, %s", rp[r-1], rp[r])
	}
	for a := 0; a < 16; a++ {
		zero(a)
	}
	ins("MOVD R6, R17")
	emit("chunk_%s:", name)
	for j, p := range qp {
		ins("VLD1.P 16(%s), [V%d.B16]", p, 16+j)
	}
	k := 0
	for r, p := range rp {
		c := 20 + r
		ins("VLD1.P 16(%s), [V%d.B16]", p, c)
		ins("VEOR V%d.B16, V%d.B16, V%d.B16", flip, c, c)
		for j := range qp {
			a := 4*j + r
			t := prod0 + 2*(k%3)
			i8Pair(dot, 16+j, c, a, a, t, t+1)
			k++
		}
	}
	ins("SUBS $1, R17, R17")
	ins("BNE chunk_%s", name)
	for j := range qp {
		i8Reduce([]int{4 * j, 4*j + 1, 4*j + 2, 4*j + 3}, nil)
	}
	ins("VST1 [V0.S4], (R0)")
	ins("ADD R1, R0, R16")
	ins("VST1 [V4.S4], (R16)")
	ins("ADD R1, R16, R16")
	ins("VST1 [V8.S4], (R16)")
	ins("ADD R1, R16, R16")
	ins("VST1 [V12.S4], (R16)")
	ins("ADD R1<<2, R0, R0")
	ins("ADD R3<<2, R2, R2")
	ins("SUBS $1, R7, R7")
	ins("BNE group_%s", name)
	ins("RET")
}

// f16Reduce folds the pairs whose A and B registers are a[r], a[r]+1 into
// the four floats of V<a[0]>: C = A+B, then (C0+C1)+(C2+C3) for each pair.
func f16Reduce(a [4]int) {
	for _, r := range a {
		word("fadd", r, r, r+1)
	}
	word("faddp", a[0], a[0], a[1])
	word("faddp", a[2], a[2], a[3])
	word("faddp", a[0], a[0], a[2])
}

// f16Chunk loads eight float32 components of each query pointer qp[j] into
// V<16+2j>, V<17+2j>, and eight halves of each row pointer rp[r], widens
// them into V21, V22 and fuses pair (j, r) into acc(j, r) and acc(j, r)+1.
func f16Chunk(qp, rp []string, acc func(j, r int) int) {
	for j, p := range qp {
		ins("VLD1.P 32(%s), [V%d.S4, V%d.S4]", p, 16+2*j, 17+2*j)
	}
	for r, p := range rp {
		ins("VLD1.P 16(%s), [V20.H8]", p)
		word("fcvtl", 21, 20)
		word("fcvtl2", 22, 20)
		for j := range qp {
			a := acc(j, r)
			ins("VFMLA V21.S4, V%d.S4, V%d.S4", 16+2*j, a)
			ins("VFMLA V22.S4, V%d.S4, V%d.S4", 17+2*j, a+1)
		}
	}
}

// f16RowsKernel: func f16RowsNEON(dst, q *float32, rows *uint16, stride, n, groups int)
// dst[4g+r] = Σ_t q[t]·half(row 4g+r [t]); stride and n in halves, n a
// multiple of 8. Pair r's accumulators are V2r and V2r+1.
func f16RowsKernel() {
	name := "f16RowsNEON"
	emit("")
	emit("// func %s(dst, q *float32, rows *uint16, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD q+8(FP), R1")
	ins("MOVD rows+16(FP), R2")
	ins("MOVD stride+24(FP), R3")
	ins("LSL $1, R3, R3")
	ins("MOVD n+32(FP), R4")
	ins("LSR $3, R4, R4")
	ins("MOVD groups+40(FP), R5")
	emit("group_%s:", name)
	ins("MOVD R1, R8")
	ins("MOVD R2, R9")
	ins("ADD R3, R9, R10")
	ins("ADD R3, R10, R11")
	ins("ADD R3, R11, R12")
	for a := 0; a < 8; a++ {
		zero(a)
	}
	ins("MOVD R4, R17")
	emit("chunk_%s:", name)
	f16Chunk([]string{"R8"}, []string{"R9", "R10", "R11", "R12"}, func(_, r int) int { return 2 * r })
	ins("SUBS $1, R17, R17")
	ins("BNE chunk_%s", name)
	f16Reduce([4]int{0, 2, 4, 6})
	ins("VST1.P [V0.S4], 16(R0)")
	ins("ADD R3<<2, R2, R2")
	ins("SUBS $1, R5, R5")
	ins("BNE group_%s", name)
	ins("RET")
}

// f16PanelKernel: func f16Panel2x4NEON(dst *float32, ldd int, qs *float32,
// qstride int, rows *uint16, rstride, n, groups int)
// dst[j*ldd+r] for r < 4, j < 2*groups; pair (j, r)'s accumulators are
// V8j+2r and V8j+2r+1.
func f16PanelKernel() {
	name := "f16Panel2x4NEON"
	emit("")
	emit("// func %s(dst *float32, ldd int, qs *float32, qstride int, rows *uint16, rstride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD ldd+8(FP), R1")
	ins("LSL $2, R1, R1")
	ins("MOVD qs+16(FP), R2")
	ins("MOVD qstride+24(FP), R3")
	ins("LSL $2, R3, R3")
	ins("MOVD rows+32(FP), R4")
	ins("MOVD rstride+40(FP), R5")
	ins("LSL $1, R5, R5")
	ins("MOVD n+48(FP), R6")
	ins("LSR $3, R6, R6")
	ins("MOVD groups+56(FP), R7")
	emit("group_%s:", name)
	ins("MOVD R2, R8")
	ins("ADD R3, R8, R9")
	ins("MOVD R4, R12")
	ins("ADD R5, R12, R13")
	ins("ADD R5, R13, R14")
	ins("ADD R5, R14, R15")
	for a := 0; a < 16; a++ {
		zero(a)
	}
	ins("MOVD R6, R17")
	emit("chunk_%s:", name)
	f16Chunk([]string{"R8", "R9"}, []string{"R12", "R13", "R14", "R15"}, func(j, r int) int { return 8*j + 2*r })
	ins("SUBS $1, R17, R17")
	ins("BNE chunk_%s", name)
	f16Reduce([4]int{0, 2, 4, 6})
	f16Reduce([4]int{8, 10, 12, 14})
	ins("VST1 [V0.S4], (R0)")
	ins("ADD R1, R0, R16")
	ins("VST1 [V8.S4], (R16)")
	ins("ADD R1<<1, R0, R0")
	ins("ADD R3<<1, R2, R2")
	ins("SUBS $1, R7, R7")
	ins("BNE group_%s", name)
	ins("RET")
}

func main() {
	emit("// Code generated by gen_quant_arm64.go; DO NOT EDIT.")
	emit("")
	emit("//go:build arm64 && !purego")
	emit("")
	emit(`#include "textflag.h"`)
	for _, dot := range []bool{true, false} {
		i8RowsKernel(dot)
		i8PanelKernel(dot)
	}
	f16RowsKernel()
	f16PanelKernel()
	if err := os.WriteFile("quant_arm64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
