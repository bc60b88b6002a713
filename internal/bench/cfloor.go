package bench

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The independent read floor (Options.CFloor): testdata/readloop.c, a
// plain streaming read of a float32 buffer with OpenMP threads, a static
// schedule and the widest loads the compiler targets, built at run time
// and driven over pipes so its passes take turns with umbra's inside every
// group. It shares no code with umbra, so it says what the machine reads
// the slab's bytes in; umbra's own floor and its search are judged by it.

//go:embed testdata/readloop.c
var readLoopSource []byte

const cFloorPremise = "testdata/readloop.c: a plain read of a buffer of the slab's bytes by OpenMP threads " +
	"(as many as the fallback's workers, static schedule, each thread writing its share first), " +
	"the widest loads -march=native gives, four accumulators; built with $CC (default gcc) -O3 -march=native -fopenmp"

// cLoop is a running readloop.
type cLoop struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	dir  string
	isa  string
	once sync.Once
}

// startCLoop builds readloop.c in a temporary directory and starts it over
// floats floats on threads threads.
func startCLoop(ctx context.Context, floats int64, threads int) (*cLoop, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Errorf("C read loop: no C compiler %q (set CC): %w", cc, err)
	}
	dir, err := os.MkdirTemp("", "umbra-readloop-")
	if err != nil {
		return nil, err
	}
	src, bin := filepath.Join(dir, "readloop.c"), filepath.Join(dir, "readloop")
	if err := os.WriteFile(src, readLoopSource, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, cc, "-O3", "-march=native", "-fopenmp", "-o", bin, src).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("C read loop: %s -O3 -march=native -fopenmp: %w: %s", cc, err, strings.TrimSpace(string(out)))
	}
	cmd := exec.Command(bin, strconv.FormatInt(floats, 10), strconv.Itoa(threads))
	// Passive waiting: between passes its threads sleep instead of
	// spinning on the cores umbra's passes are timed on.
	cmd.Env = append(os.Environ(), "OMP_WAIT_POLICY=passive")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("C read loop: %w", err)
	}
	c := &cLoop{cmd: cmd, in: in, out: bufio.NewScanner(outPipe), dir: dir}
	if !c.out.Scan() {
		c.close()
		return nil, fmt.Errorf("C read loop: no answer from %s: %v", bin, c.out.Err())
	}
	f := strings.Fields(c.out.Text())
	if len(f) != 3 || f[0] != "ready" {
		c.close()
		return nil, fmt.Errorf("C read loop: unexpected answer %q", c.out.Text())
	}
	if got, _ := strconv.Atoi(f[1]); got != threads {
		c.close()
		return nil, fmt.Errorf("C read loop: asked for %d threads, OpenMP gave %d", threads, got)
	}
	c.isa = f[2]
	return c, nil
}

// pass times one read of the buffer, on the loop's own clock.
func (c *cLoop) pass() (time.Duration, error) {
	if _, err := io.WriteString(c.in, "pass\n"); err != nil {
		return 0, fmt.Errorf("C read loop: %w", err)
	}
	if !c.out.Scan() {
		return 0, fmt.Errorf("C read loop ended: %v", c.out.Err())
	}
	f := strings.Fields(c.out.Text())
	if len(f) != 2 {
		return 0, fmt.Errorf("C read loop: unexpected answer %q", c.out.Text())
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("C read loop: %w", err)
	}
	return time.Duration(ns), nil
}

func (c *cLoop) close() {
	c.once.Do(func() {
		c.in.Close()
		if err := c.cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			c.cmd.Process.Kill()
		}
		os.RemoveAll(c.dir)
	})
}

// cFloorItem is the C loop as a timed item over the fallback's slab bytes,
// or nil (with the reason in the report) when it cannot run.
func (h *harness) cFloorItem(ctx context.Context) *timed {
	f := &FloorResult{Backend: "c", Premise: cFloorPremise}
	h.rep.floors().C = f
	stride := (h.w.Dim + 3) &^ 3 // the packed slab's stride
	f.Bytes = int64(h.w.N()) * int64(stride) * 4
	threads := h.opt.Workers
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	c, err := startCLoop(ctx, f.Bytes/4, threads)
	if err != nil {
		f.Error = err.Error()
		return nil
	}
	h.cloop = c
	f.Clock = "cpu"
	f.Premise += fmt.Sprintf(" [%d threads, %s loads]", threads, c.isa)
	return &timed{
		name: "c floor",
		call: func(context.Context, int) (time.Duration, error) { return c.pass() },
		fail: func(err error) { f.Error = err.Error() },
		done: func(groups []float64) {
			f.Timing = timingOf(groups)
			if f.Ran() {
				f.GBPerS = gbPerS(f.Bytes, *f.MedianMS)
			}
		},
	}
}

// VsC is a time stated as a multiple of the C read loop's, paired by
// group: each group's time over the C loop's in the same group.
type VsC struct {
	Name   string  `json:"name"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// pairVsC fills Floors.VsC: the fallback tier and the CPU floor as
// multiples of the C loop, group by group.
func (h *harness) pairVsC() {
	f := h.rep.Floors
	if f == nil || f.C == nil || !f.C.Ran() {
		return
	}
	pair := func(name string, groups []float64) {
		if len(groups) != len(f.C.GroupsMS) {
			return
		}
		r := make([]float64, len(groups))
		for i, g := range groups {
			r[i] = g / f.C.GroupsMS[i]
		}
		sum := Summarize(r)
		f.VsC = append(f.VsC, VsC{Name: name, Median: sum.Median, Min: sum.Min, Max: sum.Max})
	}
	if res := h.result[TierFallback]; res != nil && res.Ran() {
		pair("fallback", res.GroupsMS)
	}
	if f.CPU != nil && f.CPU.Ran() {
		pair("cpu floor", f.CPU.GroupsMS)
	}
}
