package engine

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// GPU work in a child process (Config.Isolate).
//
// Some failures of wgpu-native end the process that meets them — a submit
// on a device that was lost, the binding's device-lost handler — and no
// error scope or recover can catch them. With Config.Isolate the index's
// device side lives in a child process: this program run again, with
// childEnv set, whose main calls ServeGPUChildIfRequested first; that
// serves the device on file descriptors 3 and 4 and exits. The parent
// keeps every row on the host, as always;
// the child keeps a copy of the packed rows it uploads and answers
// searches. If the child dies, the call that met it fails with ErrGPU,
// which under Device Auto is answered by the fallback, and recovery starts
// a new child and uploads every row again.
//
// The price: the child holds a second host copy of the rows, every upload
// and search crosses a pipe, and while the child uploads it answers
// nothing else (in this process an upload and searches interleave).

// childEnv marks the process as a GPU child.
const childEnv = "UMBRA_GPU_CHILD"

// childGreeting is a child's first bytes on its replies pipe, written by
// ServeGPUChildIfRequested before it reads anything: the parent learns
// from them that the program serves GPU children at all.
const childGreeting = "umbra GPU child 1\n"

// childGreetingTimeout bounds the wait for a child's greeting: a program
// that calls ServeGPUChildIfRequested first thing in main greets within
// moments of starting.
const childGreetingTimeout = 30 * time.Second

// forgotCall is the advice every handshake failure gives.
const forgotCall = "a program that sets Config.Isolate must call engine.ServeGPUChildIfRequested() at the top of its main (a test binary: in TestMain)"

// unserved is the handshake failure of this process's first child that
// never greeted, nil before one: later children would run the program's
// main again for nothing, so they are not started.
var unserved struct {
	sync.Mutex
	err error
}

// ServeGPUChildIfRequested makes this process a GPU child of Config.Isolate
// when it was started as one, and returns at once otherwise. A program
// whose indexes set Config.Isolate must call it at the very top of its
// main, before it parses flags, prints or starts work (a test binary: at
// the top of TestMain): an isolated index runs the program's executable
// again with UMBRA_GPU_CHILD=1 in its environment, and that process must
// serve the device on file descriptors 3 and 4 instead of doing what the
// program does. As a child it serves until its parent closes the pipes or
// goes away, then exits the process; it never returns.
//
// A program that never calls it cannot start children: the first isolated
// index's child then runs the program's main instead, and the parent,
// which gets no greeting from it within 30 seconds (or sees it exit), kills
// it and fails with ErrGPU and an error naming this function; later
// isolated indexes of the process fail at once with the same error.
//
// The engine changes nothing in the process's environment; the variable is
// set only in the child's.
func ServeGPUChildIfRequested() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	replies := os.NewFile(4, "replies")
	if replies == nil {
		fmt.Fprintf(os.Stderr, "umbra: %s=1 but file descriptor 4 is not open: this process was not started as a GPU child by an isolated index\n", childEnv)
		os.Exit(2)
	}
	if _, err := io.WriteString(replies, childGreeting); err != nil {
		fmt.Fprintf(os.Stderr, "umbra: %s=1 but the parent's pipe cannot be written (%v): this process was not started as a GPU child by an isolated index\n", childEnv, err)
		os.Exit(2)
	}
	os.Exit(serveChild(os.NewFile(3, "requests"), replies))
}

// childHello is the parent's first message: what index to make.
type childHello struct {
	Dim, Metric   int
	Precision     umbra.Precision // a compressed precision's child holds its codes
	Adapter       AdapterSelect
	AllowSoftware bool
	MaxChunkRows  int
	ProbeTimeout  time.Duration
	// MaxDeviceBytes is the device side's budget of rows.
	MaxDeviceBytes int64
}

// childRequest is one call; Op names it.
type childRequest struct {
	Op       string // stage, publish, upload, truncate, rewrite, search, scores, sums, floor, calibrate
	From     int
	Total    int
	Rows     []byte // packed float32 rows (or codes), little-endian: stage/upload from From, rewrite RowIdx
	RowIdx   []int
	Queries  []byte // nq padded queries (sums: the words the device reads)
	NQ, K, N int
	Mask     []uint64
	Token    int
}

type childReply struct {
	Err       string
	TooLarge  bool
	Subnormal bool // the error is gpu.ErrSubnormal: the CPU scores the search
	RowsLost  bool // the error is gpu.ErrRowsLost: the next write sends every row
	Adapter   core.AdapterInfo
	Limits    gpu.Limits
	ChunkRows int
	Token     int
	Hits      [][]core.Hit
	Scores    []float32
	// Sums are a compressed index's raw sums as bytes: gob would carry
	// float32s through float64, which may change a NaN's bits, and int8
	// sums are int32 bit patterns.
	Sums  []byte
	Scans int
	Dur   time.Duration
	Bytes int64
	Clock string
	Rate  float64
}

// childDevice is the parent's end of a child's device side.
type childDevice struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	enc    *gob.Encoder
	dec    *gob.Decoder
	out    *bufio.Writer
	broken error
	hello  childHello
	info   childReply
	stride int
	fault  *childFault
	exited chan struct{}
}

// startChild runs this program again as a GPU child and opens its index.
// The child has greet to greet (childGreetingTimeout outside tests).
func startChild(ctx context.Context, h childHello, greet time.Duration) (*childDevice, error) {
	if os.Getenv(childEnv) == "1" {
		// This process is a child that did not serve: its parent runs this
		// very program. Starting a child of its own would do so again.
		return nil, fmt.Errorf("%w: this process was started as a GPU child (%s=1) and is running the program's main instead of serving: %s", ErrGPU, childEnv, forgotCall)
	}
	unserved.Lock()
	err := unserved.err
	unserved.Unlock()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: starting the GPU child process: %v", ErrGPU, err)
	}
	// The requests and replies travel on their own pipes (the child's
	// file descriptors 3 and 4), so nothing the program prints before it
	// calls ServeGPUChildIfRequested can mix with them.
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGPU, err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, fmt.Errorf("%w: %v", ErrGPU, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{reqR, repW}
	err = cmd.Start()
	reqR.Close() // the child's ends
	repW.Close()
	if err != nil {
		reqW.Close()
		repR.Close()
		return nil, fmt.Errorf("%w: starting the GPU child process: %v", ErrGPU, err)
	}
	stdin, stdout := reqW, repR
	out := bufio.NewWriterSize(stdin, 1<<20)
	in := bufio.NewReaderSize(stdout, 1<<20)
	c := &childDevice{cmd: cmd, fault: &childFault{}, enc: gob.NewEncoder(out), dec: gob.NewDecoder(in),
		out: out, hello: h, stride: childStride(h), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		stdin.Close()
		stdout.Close()
		close(c.exited)
	}()
	// The child may take as long as a probe; a cancelled ctx ends it.
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	if err := c.greeting(ctx, in, greet); err != nil {
		return nil, err
	}
	c.mu.Lock()
	err = c.enc.Encode(h)
	if err == nil {
		err = c.out.Flush()
	}
	if err == nil {
		err = c.dec.Decode(&c.info)
	}
	c.mu.Unlock()
	if err != nil {
		c.kill()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: the GPU child process did not start: %v", ErrGPU, err)
	}
	if c.info.Err != "" {
		c.kill()
		return nil, &AdapterError{Reason: c.info.Err, Hint: hintFor(umbra.HintProbeFailed, h.Adapter), kind: ErrNoAdapter}
	}
	return c, nil
}

// greeting waits for the child's greeting. A child that exits without
// one, says something else, or says nothing within timeout runs a program
// that does not call ServeGPUChildIfRequested: it is killed, and the
// verdict is kept for the process's later children.
func (c *childDevice) greeting(ctx context.Context, in io.Reader, timeout time.Duration) error {
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		_ = c.cmd.Process.Kill()
	})
	got := make([]byte, len(childGreeting))
	n, err := io.ReadFull(in, got)
	timer.Stop()
	if err == nil && string(got) == childGreeting {
		return nil
	}
	c.kill()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var what string
	switch {
	case timedOut.Load():
		what = fmt.Sprintf("did not answer within %v", timeout)
	case err != nil && n == 0:
		what = "exited without answering"
	case err != nil:
		what = fmt.Sprintf("exited after answering %q", got[:n])
	default:
		what = fmt.Sprintf("answered %q, not the GPU child's greeting", got)
	}
	err = fmt.Errorf("%w: the GPU child process (this program run again with %s=1) %s: %s", ErrGPU, childEnv, what, forgotCall)
	unserved.Lock()
	if unserved.err == nil {
		unserved.err = err
	}
	unserved.Unlock()
	return err
}

// childStride is the float32 elements (or code words) of one row the child
// holds.
func childStride(h childHello) int {
	if h.Precision != umbra.F32 {
		return codeWords(h.Precision, h.Dim)
	}
	return packed.StrideFor(h.Dim)
}

func (c *childDevice) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// call sends one request and waits for its reply. A child that died, or a
// reply that cannot be read, breaks the device for good: every later call
// fails at once.
func (c *childDevice) call(req childRequest) (childReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return childReply{}, c.broken
	}
	if f := c.fault.get(); f != nil {
		if err := f(req.Op); err != nil {
			return childReply{}, err
		}
	}
	var rep childReply
	err := c.enc.Encode(req)
	if err == nil {
		err = c.out.Flush()
	}
	if err == nil {
		err = c.dec.Decode(&rep)
	}
	if err != nil {
		c.broken = fmt.Errorf("%w: the GPU child process is gone: %v", ErrGPU, err)
		go c.kill()
		return childReply{}, c.broken
	}
	if rep.Err != "" {
		if rep.TooLarge {
			return rep, fmt.Errorf("%w: %s", umbra.ErrTooLarge, rep.Err)
		}
		if rep.Subnormal {
			return rep, fmt.Errorf("%w: %w", ErrGPU, gpu.ErrSubnormal)
		}
		if rep.RowsLost {
			return rep, fmt.Errorf("%w: %w: %s", ErrGPU, gpu.ErrRowsLost, rep.Err)
		}
		return rep, fmt.Errorf("%w: %s", ErrGPU, rep.Err)
	}
	return rep, nil
}

// bytesOf views float32s as their little-endian bytes (every platform the
// binding supports is little-endian).
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

func floatsOf(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (c *childDevice) Adapter() core.AdapterInfo { return c.info.Adapter }
func (c *childDevice) Limits() gpu.Limits        { return c.info.Limits }
func (c *childDevice) ChunkRows() int            { return c.info.ChunkRows }

func (c *childDevice) rows(s *packed.Slab, from int) []byte {
	return bytesOf(s.Data[from*s.Stride : s.Rows*s.Stride])
}

func (c *childDevice) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep, err := c.call(childRequest{Op: "stage", From: from, Total: s.Rows, Rows: c.rows(s, from)})
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress(s.Rows-from, s.Rows-from)
	}
	return func() { _, _ = c.call(childRequest{Op: "publish", Token: rep.Token}) }, nil
}

func (c *childDevice) Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.call(childRequest{Op: "upload", From: from, Total: s.Rows, Rows: c.rows(s, from)})
	return err
}

func (c *childDevice) Truncate(rows int) { _, _ = c.call(childRequest{Op: "truncate", N: rows}) }

// MarkDead's failure (the child gone) surfaces at the next call.
func (c *childDevice) MarkDead(rows []int) { _, _ = c.call(childRequest{Op: "dead", RowIdx: rows}) }

func (c *childDevice) Rewrite(ctx context.Context, s *packed.Slab, rows []int) error {
	data := make([]float32, 0, len(rows)*s.Stride)
	for _, r := range rows {
		data = append(data, s.PaddedRow(r)...)
	}
	_, err := c.call(childRequest{Op: "rewrite", RowIdx: rows, Rows: bytesOf(data)})
	return err
}

func (c *childDevice) Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	flat := make([]float32, 0, len(qs)*c.stride)
	for _, q := range qs {
		flat = append(flat, q...)
	}
	rep, err := c.call(childRequest{Op: "search", Queries: bytesOf(flat), NQ: len(qs), K: k, N: rows, Mask: mask})
	if err != nil {
		return nil, err
	}
	if len(rep.Hits) != len(qs) {
		return nil, fmt.Errorf("%w: the GPU child answered %d queries of %d", ErrGPU, len(rep.Hits), len(qs))
	}
	for i := range rep.Hits {
		if rep.Hits[i] == nil {
			rep.Hits[i] = []core.Hit{} // gob sends an empty slice as nil
		}
	}
	return rep.Hits, nil
}

func (c *childDevice) Scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep, err := c.call(childRequest{Op: "scores", Queries: bytesOf(q), NQ: 1, N: rows})
	if err != nil {
		return nil, err
	}
	if len(rep.Scores) != rows {
		return nil, fmt.Errorf("%w: the GPU child returned %d scores for %d rows", ErrGPU, len(rep.Scores), rows)
	}
	return rep.Scores, nil
}

func (c *childDevice) Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) ([]float32, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var flat []float32
	for _, q := range qs {
		flat = append(flat, q...)
	}
	rep, err := c.call(childRequest{Op: "sums", Queries: bytesOf(flat), NQ: len(qs), N: rows})
	if err != nil {
		return nil, 0, err
	}
	if len(rep.Sums) != 4*len(qs)*rows {
		return nil, 0, fmt.Errorf("%w: the GPU child returned %d bytes of sums for %d queries over %d rows", ErrGPU, len(rep.Sums), len(qs), rows)
	}
	// A copy, aligned for float32 whatever gob's buffer was.
	sums := make([]float32, len(qs)*rows)
	copy(bytesOf(sums), rep.Sums)
	return sums, rep.Scans, nil
}

func (c *childDevice) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	rep, err := c.call(childRequest{Op: "floor"})
	return rep.Dur, rep.Bytes, rep.Clock, err
}

func (c *childDevice) Calibrate() (time.Duration, float64, error) {
	rep, err := c.call(childRequest{Op: "calibrate"})
	return rep.Dur, rep.Rate, err
}

// Sibling and Renew start a new child: a fresh process is the only device
// side that cannot have been hurt by what happened to this one. As the
// local driver's, a Sibling shares the test's fault hook and Renew's child
// has none.
func (c *childDevice) Sibling() (device, error) {
	s, err := startChild(context.Background(), c.hello, childGreetingTimeout)
	if err != nil {
		return nil, err
	}
	s.fault = c.fault
	return s, nil
}

func (c *childDevice) Renew(ctx context.Context, timeout time.Duration) (device, error) {
	h := c.hello
	h.ProbeTimeout = timeout
	return startChild(ctx, h, childGreetingTimeout)
}

func (c *childDevice) SetFault(f func(step string) error) {
	c.fault.set(f)
}

// childFault is a test's fault hook (SetFault), shared by a child device
// and its siblings.
type childFault struct {
	mu sync.Mutex
	f  func(step string) error
}

func (h *childFault) get() func(step string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.f
}

func (h *childFault) set(f func(step string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f = f
}

// Release ends the child.
func (c *childDevice) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = fmt.Errorf("%w: the GPU child process was released", ErrGPU)
	}
	_ = c.cmd.Process.Kill()
}

// serveChild is the child's side: it opens the index the parent's hello
// asks for and answers requests until its input ends. It returns the exit
// status.
func serveChild(in io.Reader, out io.Writer) int {
	dec := gob.NewDecoder(bufio.NewReaderSize(in, 1<<20))
	w := bufio.NewWriterSize(out, 1<<20)
	enc := gob.NewEncoder(w)
	reply := func(r childReply) bool {
		return enc.Encode(r) == nil && w.Flush() == nil
	}
	var h childHello
	if err := dec.Decode(&h); err != nil {
		return 2
	}
	cfg := Config{Dim: h.Dim, Metric: umbra.Metric(h.Metric), Device: GPU, Adapters: []AdapterSelect{h.Adapter}, ProbeTimeout: h.ProbeTimeout, Precision: h.Precision,
		Limits: Limits{MaxDeviceBytes: h.MaxDeviceBytes}}
	dev, reason, _, err := openGPU(context.Background(), cfg, h.MaxChunkRows, h.AllowSoftware)
	if err != nil {
		if reason == "" {
			reason = err.Error()
		}
		reply(childReply{Err: reason})
		return 1
	}
	g := dev.(local)
	if !reply(childReply{Adapter: g.Adapter(), Limits: g.Limits(), ChunkRows: g.ChunkRows()}) {
		return 2
	}
	// mirror is the packed rows as the parent last sent them; staged are
	// uploads waiting for their publish.
	mirror := packed.NewSlab(h.Dim)
	if h.Precision != umbra.F32 {
		w := childStride(h)
		mirror = &packed.Slab{Dim: w, Stride: w}
	}
	staged := map[int]func(){}
	token := 0
	ctx := context.Background()
	fail := func(err error) childReply {
		return childReply{Err: err.Error(), TooLarge: errors.Is(err, gpu.ErrTooLarge) || errors.Is(err, umbra.ErrTooLarge),
			Subnormal: errors.Is(err, gpu.ErrSubnormal), RowsLost: errors.Is(err, gpu.ErrRowsLost)}
	}
	take := func(from, total int, rows []byte) {
		mirror.Data = append(mirror.Data[:from*mirror.Stride], floatsOf(rows)...)
		mirror.Rows = total
	}
	for {
		var req childRequest
		if err := dec.Decode(&req); err != nil {
			return 0 // the parent closed our input, or went away
		}
		var r childReply
		switch req.Op {
		case "stage":
			take(req.From, req.Total, req.Rows)
			publish, err := g.Stage(ctx, mirror, req.From, nil, nil)
			if err != nil {
				r = fail(err)
				break
			}
			token++
			staged[token], r.Token = publish, token
		case "publish":
			if p := staged[req.Token]; p != nil {
				p()
			}
			clear(staged)
		case "upload":
			take(req.From, req.Total, req.Rows)
			if err := g.Upload(ctx, mirror, req.From, nil, nil); err != nil {
				r = fail(err)
			}
		case "truncate":
			g.Truncate(req.N)
		case "dead":
			g.MarkDead(req.RowIdx)
		case "rewrite":
			src := floatsOf(req.Rows)
			for i, row := range req.RowIdx {
				copy(mirror.PaddedRow(row), src[i*mirror.Stride:(i+1)*mirror.Stride])
			}
			if err := g.Rewrite(ctx, mirror, req.RowIdx); err != nil {
				r = fail(err)
			}
		case "search":
			flat := floatsOf(req.Queries)
			qs := make([][]float32, req.NQ)
			for i := range qs {
				qs[i] = flat[i*mirror.Stride : (i+1)*mirror.Stride]
			}
			hits, err := g.Search(ctx, qs, req.K, req.N, req.Mask, nil)
			if err != nil {
				r = fail(err)
			}
			r.Hits = hits
		case "scores":
			scores, err := g.Scores(ctx, floatsOf(req.Queries), req.N)
			if err != nil {
				r = fail(err)
			}
			r.Scores = scores
		case "sums":
			flat := floatsOf(req.Queries)
			qs := make([][]float32, req.NQ)
			per := len(flat) / max(req.NQ, 1)
			for i := range qs {
				qs[i] = flat[i*per : (i+1)*per]
			}
			sums, scans, err := g.Sums(ctx, qs, req.N, nil)
			if err != nil {
				r = fail(err)
			}
			r.Sums, r.Scans = bytesOf(sums), scans
		case "floor":
			d, b, clock, err := g.Floor(ctx)
			if err != nil {
				r = fail(err)
			}
			r.Dur, r.Bytes, r.Clock = d, b, clock
		case "calibrate":
			d, rate, err := g.Calibrate()
			if err != nil {
				r = fail(err)
			}
			r.Dur, r.Rate = d, rate
		default:
			r.Err = "unknown request " + req.Op
		}
		if !reply(r) {
			return 0
		}
	}
}
