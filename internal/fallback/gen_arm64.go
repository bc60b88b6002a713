//go:build ignore

// gen_arm64.go writes dot_arm64.s: go run gen_arm64.go
//
// The NEON kernels follow gen_amd64.go's rule: every kernel computes a
// (row, query) pair in exactly the same order, so the single-query, batch
// and scores paths return bit-identical scores. A pair owns eight float32
// lanes held in two registers, A (components 8c..8c+3 of each chunk c) and
// B (8c+4..8c+7), fed by fused multiply-adds (VFMLA); a last half chunk of
// four goes into A, and a last partial chunk of one to three components is
// loaded lane by lane into zeroed registers (NEON has no masked load; the
// zero lanes add nothing and nothing past the slice is read) and also
// fused into A. The pair's sum is then (A+B) folded by one fixed pairwise
// tree. Independence comes from pairs: four rows per group in every
// kernel, times two queries in a batch panel (2 queries × 4 rows × 2
// registers = 16 accumulators of the 32 vector registers).
//
// Go's arm64 assembler has VFMLA, VLD1, VST1, VEOR and PRFM but no vector
// FADD, FSUB or FADDP; those are emitted as WORD encodings (enc below), each
// with its mnemonic beside it. The encodings were checked against
// llvm-mc -triple=aarch64 -show-encoding, and the tests run the kernels
// under qemu-aarch64.
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

// Encodings of the vector instructions Go's assembler lacks: base opcode
// with Rd in bits 0–4, Rn in 5–9 and Rm in 16–20 (Arm ARM, C7.2).
var enc = map[string]uint32{
	"fadd.4s":  0x4e20d400, // FADD Vd.4S, Vn.4S, Vm.4S
	"fsub.4s":  0x4ea0d400, // FSUB Vd.4S, Vn.4S, Vm.4S
	"faddp.4s": 0x6e20d400, // FADDP Vd.4S, Vn.4S, Vm.4S (pairs of Vn, then of Vm)
}

// word emits op vd, vn, vm as a WORD.
func word(op string, d, n, m int) {
	base, ok := enc[op]
	if !ok {
		log.Fatalf("no encoding for %s", op)
	}
	mn := op[:len(op)-3]
	ins("WORD $0x%08x // %s v%d.4s, v%d.4s, v%d.4s", base|uint32(m)<<16|uint32(n)<<5|uint32(d), mn, d, n, m)
}

func v(n int) string { return fmt.Sprintf("V%d.S4", n) }

func zero(n int) { ins("VEOR V%d.B16, V%d.B16, V%d.B16", n, n, n) }

// reduce4 folds the pairs whose A and B registers are a[r], a[r]+1 for
// r < 4 into the four floats of V<a[0]>, in that order: C = A+B, then
// c = (C0+C1) + (C2+C3) for each pair. Every kernel uses this tree.
func reduce4(a [4]int) {
	for _, r := range a {
		word("fadd.4s", r, r, r+1)
	}
	word("faddp.4s", a[0], a[0], a[1])
	word("faddp.4s", a[2], a[2], a[3])
	word("faddp.4s", a[0], a[0], a[2])
}

// fuse adds the pair term of query register q and row register r into
// accumulator acc: q·r (dot), (q−r)² (l2, via diff) or r (sum).
func fuse(metric string, q, r, diff, acc int) {
	switch metric {
	case "sum":
		word("fadd.4s", acc, acc, r)
	case "l2":
		word("fsub.4s", diff, q, r)
		ins("VFMLA %s, %s, %s", v(diff), v(diff), v(acc))
	default:
		ins("VFMLA %s, %s, %s", v(r), v(q), v(acc))
	}
}

// walk emits the chunk loop, the half chunk and the partial chunk over n
// floats (R6 = n/8, R7 = n%8) for the query pointers qp (registers qr[j],
// qr[j]+1) and row pointers rp (loaded into rr, rr+1), fusing pair (j, r)
// into acc(j, r) and acc(j, r)+1. R17 counts; the pointers advance.
func walk(name, metric string, qp []string, qr []int, rp []string, rr, diff int, acc func(j, r int) int) {
	sum := metric == "sum"
	nq := len(qp)
	if sum {
		nq = 1
	}
	body := func(half bool) {
		for j := range qp {
			if half {
				ins("VLD1.P 16(%s), [%s]", qp[j], v(qr[j]))
			} else {
				ins("VLD1.P 32(%s), [%s, %s]", qp[j], v(qr[j]), v(qr[j]+1))
			}
		}
		for r, p := range rp {
			if half {
				ins("VLD1.P 16(%s), [%s]", p, v(rr))
			} else {
				ins("VLD1.P 32(%s), [%s, %s]", p, v(rr), v(rr+1))
			}
			for j := 0; j < nq; j++ {
				q := 0
				if !sum {
					q = qr[j]
				}
				fuse(metric, q, rr, diff, acc(j, r))
				if !half {
					fuse(metric, q+1, rr+1, diff+1, acc(j, r)+1)
				}
			}
		}
	}
	ins("MOVD R6, R17")
	ins("CBZ R17, half_%s", name)
	emit("chunk_%s:", name)
	body(false)
	ins("SUBS $1, R17, R17")
	ins("BNE chunk_%s", name)
	emit("half_%s:", name)
	ins("TBZ $2, R7, part_%s", name)
	body(true)
	emit("part_%s:", name)
	ins("ANDS $3, R7, R17")
	ins("BEQ reduce_%s", name)
	// One to three components: zero the registers, then fill lanes.
	for j := range qp {
		zero(qr[j])
	}
	for r := range rp {
		zero(rr + r)
	}
	for lane := 0; lane < 3; lane++ {
		if lane > 0 {
			ins("CMP $%d, R17", lane)
			ins("BEQ fill_%s", name)
		}
		for j := range qp {
			ins("VLD1.P 4(%s), V%d.S[%d]", qp[j], qr[j], lane)
		}
		for r, p := range rp {
			ins("VLD1.P 4(%s), V%d.S[%d]", p, rr+r, lane)
		}
	}
	emit("fill_%s:", name)
	for r := range rp {
		for j := 0; j < nq; j++ {
			q := 0
			if !sum {
				q = qr[j]
			}
			fuse(metric, q, rr+r, diff, acc(j, r))
		}
	}
	emit("reduce_%s:", name)
}

// rowsKernel: func name(dst, q, rows *float32, stride, n, groups int)
// dst[4g+r] = score(q, row 4g+r) for g < groups; stride and n in floats.
//
// Pair r's accumulators are V2r and V2r+1; the query is V16–V17, the rows
// V18–V21 (the partial chunk uses one register per row), differences
// V22–V23.
func rowsKernel(metric string) {
	name := metric + "RowsNEON"
	emit("")
	emit("// func %s(dst, q, rows *float32, stride, n, groups int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD q+8(FP), R1")
	ins("MOVD rows+16(FP), R2")
	ins("MOVD stride+24(FP), R3")
	ins("LSL $2, R3, R3")
	ins("MOVD n+32(FP), R4")
	ins("MOVD groups+40(FP), R5")
	ins("LSR $3, R4, R6")
	ins("AND $7, R4, R7")
	emit("group_%s:", name)
	ins("MOVD R1, R8")
	ins("MOVD R2, R9")
	ins("ADD R3, R9, R10")
	ins("ADD R3, R10, R11")
	ins("ADD R3, R11, R12")
	for a := 0; a < 8; a++ {
		zero(a)
	}
	qp := []string{"R8"}
	if metric == "sum" {
		qp = nil
	}
	walk(name, metric, qp, []int{16}, []string{"R9", "R10", "R11", "R12"}, 18, 22,
		func(_, r int) int { return 2 * r })
	reduce4([4]int{0, 2, 4, 6})
	ins("VST1.P [V0.S4], 16(R0)")
	ins("ADD R3<<2, R2, R2")
	ins("SUBS $1, R5, R5")
	ins("BNE group_%s", name)
	ins("RET")
}

// streamKernel: func streamNEON(p *float32, n int) float32, the read
// floor's kernel: the sum of p[0:n), n a multiple of 16, read strictly in
// order, 64 bytes a load instruction, into four accumulators.
func streamKernel() {
	name := "streamNEON"
	emit("")
	emit("// func %s(p *float32, n int) float32", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-20", name)
	ins("MOVD p+0(FP), R0")
	ins("MOVD n+8(FP), R1")
	ins("LSR $4, R1, R1")
	for a := 0; a < 4; a++ {
		zero(a)
	}
	ins("CBZ R1, done_%s", name)
	emit("loop_%s:", name)
	ins("VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for a := 0; a < 4; a++ {
		word("fadd.4s", a, a, a+4)
	}
	ins("SUBS $1, R1, R1")
	ins("BNE loop_%s", name)
	emit("done_%s:", name)
	word("fadd.4s", 0, 0, 1)
	word("fadd.4s", 2, 2, 3)
	word("fadd.4s", 0, 0, 2)
	word("faddp.4s", 0, 0, 0)
	word("faddp.4s", 0, 0, 0)
	ins("FMOVS F0, ret+16(FP)")
	ins("RET")
}

// panelKernel: func name(dst *float32, ldd int, qs *float32, qstride int,
// rows *float32, rstride, n, groups int, pf *float32, pfLines int)
// dst[j*ldd+r] = score(query j, row r) for r < 4, j < 2*groups.
//
// As on amd64, a panel holds four rows (in L1) and walks groups of two
// queries, each group prefetching pfLines cache lines from pf onward (the
// caller points pf at the next four rows).
//
// Pair (j, r)'s accumulators are V8j+2r and V8j+2r+1; queries V16–V19,
// rows V20–V21 (partial chunk: V20–V23), differences V24–V25.
func panelKernel(l2 bool) {
	metric := "dot"
	if l2 {
		metric = "l2"
	}
	name := metric + "Panel2x4NEON"
	emit("")
	emit("// func %s(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int, pf *float32, pfLines int)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	ins("MOVD dst+0(FP), R0")
	ins("MOVD ldd+8(FP), R1")
	ins("LSL $2, R1, R1")
	ins("MOVD qs+16(FP), R2")
	ins("MOVD qstride+24(FP), R3")
	ins("LSL $2, R3, R3")
	ins("MOVD rows+32(FP), R4")
	ins("MOVD rstride+40(FP), R5")
	ins("LSL $2, R5, R5")
	ins("MOVD n+48(FP), R6")
	ins("AND $7, R6, R7")
	ins("LSR $3, R6, R6")
	ins("MOVD groups+56(FP), R19")
	ins("MOVD pf+64(FP), R9")
	emit("group_%s:", name)
	ins("MOVD pfLines+72(FP), R10")
	ins("CBZ R10, nopf_%s", name)
	emit("pf_%s:", name)
	ins("PRFM (R9), PLDL1KEEP")
	ins("ADD $64, R9, R9")
	ins("SUBS $1, R10, R10")
	ins("BNE pf_%s", name)
	emit("nopf_%s:", name)
	ins("MOVD R2, R11")
	ins("ADD R3, R2, R12")
	ins("MOVD R4, R13")
	ins("ADD R5, R13, R14")
	ins("ADD R5, R14, R15")
	ins("ADD R5, R15, R16")
	for a := 0; a < 16; a++ {
		zero(a)
	}
	walk(name, metric, []string{"R11", "R12"}, []int{16, 18}, []string{"R13", "R14", "R15", "R16"}, 20, 24,
		func(j, r int) int { return 8*j + 2*r })
	reduce4([4]int{0, 2, 4, 6})
	reduce4([4]int{8, 10, 12, 14})
	ins("VST1 [V0.S4], (R0)")
	ins("ADD R1, R0, R20")
	ins("VST1 [V8.S4], (R20)")
	ins("ADD R1<<1, R0, R0")
	ins("ADD R3<<1, R2, R2")
	ins("SUBS $1, R19, R19")
	ins("BNE group_%s", name)
	ins("RET")
}

func main() {
	emit("// Code generated by gen_arm64.go; DO NOT EDIT.")
	emit("")
	emit("//go:build arm64 && !purego")
	emit("")
	emit(`#include "textflag.h"`)
	for _, metric := range []string{"dot", "l2"} {
		rowsKernel(metric)
	}
	streamKernel()
	panelKernel(false)
	panelKernel(true)
	if err := os.WriteFile("dot_arm64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
