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

// rowsPrefetch is how far ahead (bytes) the eight-row kernels prefetch
// each row's stream: measured on a Zen 5 EPYC (16, 32 and 64 KiB ran
// alike, 4 KiB and none slower; see docs/benchmarks.md).
const rowsPrefetch = 32 << 10

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

// rowsPtr are the row pointers of a rows kernel: up to eight rows walked
// in step.
var rowsPtr = []string{"DX", "BX", "R9", "R11", "R12", "R13", "R14", "R15"}

// reduce1 sums the lanes of accumulator a into the low float of X<a> by
// reduce4's tree (the upper half onto the lower, then pairs, then pairs of
// pairs, then the two 128-bit halves), so one row alone scores the very
// bits it scores in a group of four.
func reduce1(i isa, a int) {
	if i.w == 16 {
		ins("VEXTRACTF64X4 $1, Z%d, Y15", a)
		ins("VADDPS Y15, Y%d, Y%d", a, a)
	}
	ins("VHADDPS Y%d, Y%d, Y%d", a, a, a)
	ins("VHADDPS Y%d, Y%d, Y%d", a, a, a)
	ins("VEXTRACTF128 $1, Y%d, X15", a)
	ins("VADDPS X15, X%d, X%d", a, a)
}

// rowsKernel: func name(dst, q, rows *float32, stride, n, groups int)
// dst[R*g+r] = score(q, row R*g+r) for g < groups; stride and n in floats.
//
// R rows are walked in step, one accumulator each. R = 1 reads memory
// strictly in order (a row, then the next): short rows, whose chains of
// fused multiply-adds are short, run at the memory's pace that way. R = 8
// keeps eight independent chains, for long rows, and prefetches each row's
// stream pf bytes ahead (0: none), since eight streams a few KiB apart are
// more than the hardware prefetchers follow on every CPU.
func rowsKernel(i isa, metric string, r8 int, pf int) {
	l2 := metric == "l2"
	name := fmt.Sprintf("%sRows%d%s", metric, r8, i.name)
	q, row, diff := reg(i, 16), reg(i, 17), reg(i, 18)
	if i.w == 8 {
		q, row, diff = "Y8", "Y9", "Y10"
	}
	tmp := "Y21"
	if i.w == 8 {
		tmp = ""
	}
	ptr := rowsPtr[:r8]
	emit("")
	emit("// func %s(dst, q, rows *float32, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ rows+16(FP), DX")
	ins("MOVQ stride+24(FP), R8")
	ins("SHLQ $2, R8")
	ins("MOVQ n+32(FP), CX")
	setupMask(i)
	ins("MOVQ groups+40(FP), R10")
	emit("group_%s:", name)
	for r := 1; r < r8; r++ {
		ins("LEAQ (%s)(R8*1), %s", ptr[r-1], ptr[r])
	}
	for r := 0; r < r8; r++ {
		ins("VXORPS %s, %s, %s", reg(i, r), reg(i, r), reg(i, r))
	}
	ins("XORQ AX, AX")
	ins("MOVQ n+32(FP), CX")
	ins("SHRQ $%d, CX", i.shift)
	ins("JZ tail_%s", name)
	emit("chunk_%s:", name)
	ins("VMOVUPS (SI)(AX*1), %s", q)
	for r := 0; r < r8; r++ {
		src := fmt.Sprintf("(%s)(AX*1)", ptr[r])
		if l2 {
			ins("VSUBPS %s, %s, %s", src, q, diff)
			ins("VFMADD231PS %s, %s, %s", diff, diff, reg(i, r))
		} else {
			ins("VFMADD231PS %s, %s, %s", src, q, reg(i, r))
		}
	}
	if pf > 0 {
		for r := 0; r < r8; r++ {
			ins("PREFETCHT0 %d(%s)(AX*1)", pf, ptr[r])
		}
	}
	ins("ADDQ $%d, AX", i.bytes)
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("tail_%s:", name)
	ins("MOVQ n+32(FP), CX")
	ins("ANDQ $%d, CX", i.w-1)
	ins("JZ reduce_%s", name)
	maskedLoad(i, "(SI)(AX*1)", q)
	for r := 0; r < r8; r++ {
		maskedLoad(i, fmt.Sprintf("(%s)(AX*1)", ptr[r]), row)
		if l2 {
			ins("VSUBPS %s, %s, %s", row, q, diff)
			ins("VFMADD231PS %s, %s, %s", diff, diff, reg(i, r))
		} else {
			ins("VFMADD231PS %s, %s, %s", row, q, reg(i, r))
		}
	}
	emit("reduce_%s:", name)
	if r8 == 1 {
		reduce1(i, 0)
		ins("VMOVSS X0, (DI)")
	} else {
		for a := 0; a < r8; a += 4 {
			reduce4(i, a, tmp)
			ins("VMOVUPS X%d, %d(DI)", a, 4*a)
		}
	}
	ins("ADDQ $%d, DI", 4*r8)
	ins("LEAQ (%s)(R8*1), DX", ptr[r8-1])
	ins("DECQ R10")
	ins("JNZ group_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// gatherKernel: func name(dst, q, base *float32, idx *uint32, stride, n,
// count, ahead int)
// dst[j] = score(q, row idx[j]) for j < count, row i being the stride
// floats from base + i*stride: a filtered search's admitted rows, scored
// one at a time by the one-row kernel's loop and tree, so each scores the
// very bits a scan gives it. Before row j it prefetches every line of row
// idx[j+ahead] (while j+ahead < count): the rows are scattered, so no
// hardware prefetcher can guess the next one.
func gatherKernel(i isa, metric string) {
	l2 := metric == "l2"
	name := fmt.Sprintf("%sGather%s", metric, i.name)
	q, row, diff := reg(i, 16), reg(i, 17), reg(i, 18)
	if i.w == 8 {
		q, row, diff = "Y8", "Y9", "Y10"
	}
	fuse := func(src string) {
		if l2 {
			ins("VSUBPS %s, %s, %s", src, q, diff)
			ins("VFMADD231PS %s, %s, %s", diff, diff, reg(i, 0))
		} else {
			ins("VFMADD231PS %s, %s, %s", src, q, reg(i, 0))
		}
	}
	emit("")
	emit("// func %s(dst, q, base *float32, idx *uint32, stride, n, count, ahead int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	ins("MOVQ dst+0(FP), DI")
	ins("MOVQ q+8(FP), SI")
	ins("MOVQ base+16(FP), DX")
	ins("MOVQ idx+24(FP), BX")
	ins("MOVQ stride+32(FP), R8")
	ins("SHLQ $2, R8")
	ins("MOVQ n+40(FP), CX")
	ins("LEAQ 63(CX*4), R12")
	ins("SHRQ $6, R12") // lines a row
	setupMask(i)
	ins("MOVQ count+48(FP), R10")
	ins("MOVQ ahead+56(FP), R11")
	emit("row_%s:", name)
	ins("CMPQ R10, R11")
	ins("JLE nopf_%s", name)
	ins("MOVL (BX)(R11*4), AX")
	ins("IMULQ R8, AX")
	ins("ADDQ DX, AX")
	ins("MOVQ R12, CX")
	emit("pf_%s:", name)
	ins("PREFETCHT0 (AX)")
	ins("ADDQ $64, AX")
	ins("DECQ CX")
	ins("JNZ pf_%s", name)
	emit("nopf_%s:", name)
	ins("MOVL (BX), AX")
	ins("IMULQ R8, AX")
	ins("LEAQ (DX)(AX*1), R13")
	ins("VXORPS %s, %s, %s", reg(i, 0), reg(i, 0), reg(i, 0))
	ins("XORQ AX, AX")
	ins("MOVQ n+40(FP), CX")
	ins("SHRQ $%d, CX", i.shift)
	ins("JZ tail_%s", name)
	emit("chunk_%s:", name)
	ins("VMOVUPS (SI)(AX*1), %s", q)
	fuse("(R13)(AX*1)")
	ins("ADDQ $%d, AX", i.bytes)
	ins("DECQ CX")
	ins("JNZ chunk_%s", name)
	emit("tail_%s:", name)
	ins("MOVQ n+40(FP), CX")
	ins("ANDQ $%d, CX", i.w-1)
	ins("JZ reduce_%s", name)
	maskedLoad(i, "(SI)(AX*1)", q)
	maskedLoad(i, "(R13)(AX*1)", row)
	fuse(row)
	emit("reduce_%s:", name)
	reduce1(i, 0)
	ins("VMOVSS X0, (DI)")
	ins("ADDQ $4, DI")
	ins("ADDQ $4, BX")
	ins("DECQ R10")
	ins("JNZ row_%s", name)
	ins("VZEROUPPER")
	ins("RET")
}

// streamKernel: func name(p *float32, n int) float32, the read floor's
// kernel: the sum of p[0:n), n a multiple of four vectors, read strictly in
// order with the widest loads into four accumulators. No query, no row
// structure: the plain streaming read the scans are judged against.
func streamKernel(i isa) {
	name := "stream" + i.name
	emit("")
	emit("// func %s(p *float32, n int) float32", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-20", name)
	ins("MOVQ p+0(FP), SI")
	ins("MOVQ n+8(FP), CX")
	ins("SHRQ $%d, CX", i.shift+2)
	for a := 0; a < 4; a++ {
		ins("VXORPS %s, %s, %s", reg(i, a), reg(i, a), reg(i, a))
	}
	ins("TESTQ CX, CX")
	ins("JZ done_%s", name)
	emit("loop_%s:", name)
	for a := 0; a < 4; a++ {
		ins("VADDPS %d(SI), %s, %s", a*i.bytes, reg(i, a), reg(i, a))
	}
	ins("ADDQ $%d, SI", 4*i.bytes)
	ins("DECQ CX")
	ins("JNZ loop_%s", name)
	emit("done_%s:", name)
	ins("VADDPS %s, %s, %s", reg(i, 1), reg(i, 0), reg(i, 0))
	ins("VADDPS %s, %s, %s", reg(i, 3), reg(i, 2), reg(i, 2))
	ins("VADDPS %s, %s, %s", reg(i, 2), reg(i, 0), reg(i, 0))
	reduce1(i, 0)
	ins("VMOVSS X0, ret+16(FP)")
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
		for _, metric := range []string{"dot", "l2"} {
			rowsKernel(i, metric, 1, 0)
			rowsKernel(i, metric, 4, 0)
			rowsKernel(i, metric, 8, rowsPrefetch)
			gatherKernel(i, metric)
		}
		streamKernel(i)
	}
	for _, l2 := range []bool{false, true} {
		panelKernel(avx2, l2, 2)
		panelKernel(avx512, l2, 4)
	}
	if err := os.WriteFile("dot_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
