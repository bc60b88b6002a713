//go:build ignore

// gen_amd64.go writes dot_amd64.s: go run gen_amd64.go
//
// The kernels are generated rather than written by hand because every one
// of them must compute a (row, query) pair in exactly the same order, so
// that the single-query, batch and scores paths return bit-identical
// scores. Each pair owns one vector accumulator of W lanes; chunk c of the
// stride is fused into it (FMA); a final partial chunk is loaded under a
// mask (masked-off lanes read as zero, add nothing and cannot fault); the
// lanes are then reduced by one fixed tree. Independence comes from pairs,
// not from splitting a pair: four rows per group in every kernel, times the
// queries of a batch panel.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

type isa struct {
	name  string // suffix of the Go names
	w     int    // lanes
	shift int    // log2(w)
	v     string // register prefix
	bytes int
}

var (
	avx2   = isa{"AVX2", 8, 3, "Y", 32}
	avx512 = isa{"AVX512", 16, 4, "Z", 64}
)

var out bytes.Buffer

func emit(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
func ins(format string, args ...any)  { emit("\t"+format, args...) }

func reg(i isa, n int) string { return fmt.Sprintf("%s%d", i.v, n) }

// maskedLoad loads the final partial chunk at src, zero elsewhere.
func maskedLoad(i isa, src, dst string) {
	if i.w == 16 {
		ins("VMOVUPS.Z %s, K1, %s", src, dst)
	} else {
		ins("VMASKMOVPS %s, Y12, %s", src, dst)
	}
}

// setupMask prepares the tail mask for n in CX (clobbers AX, CX).
func setupMask(i isa) {
	ins("ANDQ $%d, CX", i.w-1)
	if i.w == 16 {
		ins("MOVL $1, AX")
		ins("SHLL CX, AX")
		ins("DECL AX")
		ins("KMOVW AX, K1")
	} else {
		ins("NEGQ CX")
		ins("LEAQ tailMask<>+32(SB), AX")
		ins("VMOVDQU (AX)(CX*4), Y12")
	}
}

// reduce4 sums the lanes of accumulators a..a+3 into the low four floats
// of X<a>, in that order. Every kernel uses this tree.
func reduce4(i isa, a int, tmp string) {
	if i.w == 16 {
		for k := a; k < a+4; k++ {
			ins("VEXTRACTF64X4 $1, Z%d, %s", k, tmp)
			ins("VADDPS %s, Y%d, Y%d", tmp, k, k)
		}
	}
	ins("VHADDPS Y%d, Y%d, Y%d", a+1, a, a)
	ins("VHADDPS Y%d, Y%d, Y%d", a+3, a+2, a+2)
	ins("VHADDPS Y%d, Y%d, Y%d", a+2, a, a)
	ins("VEXTRACTF128 $1, Y%d, X%d", a, a+1)
	ins("VADDPS X%d, X%d, X%d", a+1, a, a)
}

var rowPtr = []string{"DX", "BX", "R13", "R14"}

// rowsKernel: func name(dst, q, rows *float32, stride, n, groups int)
// dst[4g+r] = score(q, row 4g+r) for g < groups; stride and n in floats.
// metric "sum" is the floor's kernel: the same four-row walk and loads with
// no query and no multiply, dst[4g+r] = sum of row 4g+r.
func rowsKernel(i isa, metric string) {
	l2, sum := metric == "l2", metric == "sum"
	name := fmt.Sprintf("%sRows%s", metric, i.name)
	q, row, diff := reg(i, 16), reg(i, 17), reg(i, 18)
	if i.w == 8 {
		q, row, diff = "Y8", "Y9", "Y10"
	}
	tmp := "Y21"
	if i.w == 8 {
		tmp = ""
	}
	emit("")
	emit("// func %s(dst, q, rows *float32, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("SHLQ $2, R8")
	ins("LEAQ (R8)(R8*2), R9")
	ins("MOVQ n+32(FP), CX")
	ins("MOVQ CX, R12")
	ins("SHRQ $%d, R12", i.shift)
	ins("MOVQ CX, R11")
	ins("ANDQ $%d, R11", i.w-1)
	setupMask(i)
	ins("MOVQ groups+40(FP), R10")
	emit("group_%s:", name)
	ins("LEAQ (DX)(R8*1), BX")
	ins("LEAQ (DX)(R8*2), R13")
	ins("LEAQ (DX)(R9*1), R14")
	for r := 0; r < 4; r++ {
		ins("VXORPS %s, %s, %s", reg(i, r), reg(i, r), reg(i, r))
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ tail_%s", name)
	emit("chunk_%s:", name)
	if !sum {
		ins("VMOVUPS (SI)(AX*1), %s", q)
	}
	for r := 0; r < 4; r++ {
		src := fmt.Sprintf("(%s)(AX*1)", rowPtr[r])
		if sum {
			ins("VADDPS %s, %s, %s", src, reg(i, r), reg(i, r))
		} else if l2 {
			ins("VSUBPS %s, %s, %s", src, q, diff)
			ins("VFMADD231PS %s, %s, %s", diff, diff, reg(i, r))
		} else {
			ins("VFMADD231PS %s, %s, %s", src, q, reg(i, r))
		}
	}
	ins("ADDQ $%d, AX", i.bytes)
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("tail_%s:", name)
	ins("TESTQ R11, R11")
	ins("JZ reduce_%s", name)
	if !sum {
		maskedLoad(i, "(SI)(AX*1)", q)
	}
	for r := 0; r < 4; r++ {
		maskedLoad(i, fmt.Sprintf("(%s)(AX*1)", rowPtr[r]), row)
		if sum {
			ins("VADDPS %s, %s, %s", row, reg(i, r), reg(i, r))
		} else if l2 {
			ins("VSUBPS %s, %s, %s", row, q, diff)
			ins("VFMADD231PS %s, %s, %s", diff, diff, reg(i, r))
		} else {
			ins("VFMADD231PS %s, %s, %s", row, q, reg(i, r))
		}
	}
	emit("reduce_%s:", name)
	reduce4(i, 0, tmp)
	ins("VMOVUPS X0, (DI)")
	ins("ADDQ $16, DI")
	ins("LEAQ (DX)(R8*4), DX")
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

var qPtr = []string{"SI", "R9", "R10", "R11"}

// panelKernel: func name(dst *float32, ldd int, qs *float32, qstride int,
// rows *float32, rstride, n, groups int, pf *float32, pfLines int)
// dst[j*ldd+r] = score(query j, row r) for r < 4, j < nq*groups.
//
// A panel holds four rows (they stay in L1) and walks groups of nq queries
// (streamed from L2), so a row is fetched from memory once per batch of
// queries. Memory would idle while the rows are reused, so each group
// also prefetches pfLines cache lines from pf onward: the caller points pf
// at the next four rows.
//
// Accumulator of (query j of the group, row r) is register 4j+r.
func panelKernel(i isa, l2 bool, nq int) {
	metric := "dot"
	if l2 {
		metric = "l2"
	}
	name := fmt.Sprintf("%sPanel%dx4%s", metric, nq, i.name)
	var qr []string
	var row, diff, tmp string
	if i.w == 16 {
		for j := 0; j < nq; j++ {
			qr = append(qr, reg(i, 16+j))
		}
		row, diff, tmp = "Z24", "Z25", "Y26"
	} else {
		for j := 0; j < nq; j++ {
			qr = append(qr, reg(i, 4*nq+j))
		}
		row, diff = reg(i, 4*nq+nq), reg(i, 4*nq+nq+1)
		if 4*nq+nq+1 >= 12 {
			log.Fatalf("%s: Y12 holds the tail mask", name)
		}
	}
	emit("")
	emit("// func %s(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int, pf *float32, pfLines int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $16-80", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ qs+16(FP), SI")
	ins("MOVQ rows+32(FP), DX")
	ins("MOVQ rstride+40(FP), CX")
	ins("SHLQ $2, CX")
	for r := 1; r < 4; r++ {
		ins("LEAQ (%s)(CX*1), %s", rowPtr[r-1], rowPtr[r])
	}
	ins("MOVQ qstride+24(FP), R8")
	ins("SHLQ $2, R8")
	ins("MOVQ n+48(FP), CX")
	ins("MOVQ CX, R12")
	ins("SHRQ $%d, R12", i.shift)
	setupMask(i)
	ins("MOVQ groups+56(FP), CX")
	ins("MOVQ CX, left-8(SP)")
	ins("MOVQ pf+64(FP), CX")
	ins("MOVQ CX, pf-16(SP)")
	emit("group_%s:", name)
	ins("MOVQ pfLines+72(FP), CX")
	ins("TESTQ CX, CX")
	ins("JZ nopf_%s", name)
	ins("MOVQ pf-16(SP), AX")
	emit("pf_%s:", name)
	ins("PREFETCHT0 (AX)")
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ pf_%s", name)
	ins("MOVQ AX, pf-16(SP)")
	emit("nopf_%s:", name)
	for j := 1; j < nq; j++ {
		ins("LEAQ (%s)(R8*1), %s", qPtr[j-1], qPtr[j])
	}
	for a := 0; a < 4*nq; a++ {
		ins("VXORPS %s, %s, %s", reg(i, a), reg(i, a), reg(i, a))
	}
	ins("XORQ AX, AX")
	ins("MOVQ R12, CX")
	ins("TESTQ CX, CX")
	ins("JZ tail_%s", name)
	body := func(load func(src, dst string)) {
		for j := 0; j < nq; j++ {
			load(fmt.Sprintf("(%s)(AX*1)", qPtr[j]), qr[j])
		}
		for r := 0; r < 4; r++ {
			load(fmt.Sprintf("(%s)(AX*1)", rowPtr[r]), row)
			for j := 0; j < nq; j++ {
				acc := reg(i, 4*j+r)
				if l2 {
					ins("VSUBPS %s, %s, %s", qr[j], row, diff)
					ins("VFMADD231PS %s, %s, %s", diff, diff, acc)
				} else {
					ins("VFMADD231PS %s, %s, %s", row, qr[j], acc)
				}
			}
		}
	}
	emit("chunk_%s:", name)
	body(func(src, dst string) { ins("VMOVUPS %s, %s", src, dst) })
	ins("ADDQ $%d, AX", i.bytes)
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("tail_%s:", name)
	ins("MOVQ n+48(FP), CX")
	ins("ANDQ $%d, CX", i.w-1)
	ins("JZ reduce_%s", name)
	body(func(src, dst string) { maskedLoad(i, src, dst) })
	emit("reduce_%s:", name)
	ins("MOVQ ldd+8(FP), CX")
	ins("SHLQ $2, CX")
	ins("LEAQ (CX)(CX*2), AX")
	dsts := []string{"(DI)", "(DI)(CX*1)", "(DI)(CX*2)", "(DI)(AX*1)"}
	for j := 0; j < nq; j++ {
		reduce4(i, 4*j, tmp)
		ins("VMOVUPS X%d, %s", 4*j, dsts[j])
	}
	ins("LEAQ (DI)(CX*%d), DI", nq)
	ins("LEAQ (SI)(R8*%d), SI", nq)
	ins("DECQ left-8(SP)")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

func main() {
	emit("// Code generated by gen_amd64.go; DO NOT EDIT.")
	emit("")
	emit("//go:build amd64 && !purego")
	emit("")
	emit(`#include "textflag.h"`)
	emit("")
	emit("// Eight all-ones lanes then eight zero lanes: loading 8 lanes from")
	emit("// tailMask+32-4*rem gives rem leading ones, the AVX2 tail mask.")
	for k := 0; k < 16; k++ {
		v := "$0xffffffff"
		if k >= 8 {
			v = "$0"
		}
		emit("DATA tailMask<>+%d(SB)/4, %s", 4*k, v)
	}
	emit("GLOBL tailMask<>(SB), RODATA|NOPTR, $64")
	for _, i := range []isa{avx2, avx512} {
		for _, metric := range []string{"dot", "l2", "sum"} {
			rowsKernel(i, metric)
		}
	}
	for _, l2 := range []bool{false, true} {
		panelKernel(avx2, l2, 2)
		panelKernel(avx512, l2, 4)
	}
	if err := os.WriteFile("dot_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
