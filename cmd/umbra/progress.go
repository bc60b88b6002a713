package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/umbravec/umbra/engine"
)

// progress draws a one-line status on stderr for steps that run longer than
// a second, and only when stderr is a terminal: pipes, logs and tests see
// nothing. A step's line shows its elapsed time, then, once the step ends,
// how long it took.
type progress struct {
	w       io.Writer
	enabled bool
	delay   time.Duration // how long a step runs before its line appears
	every   time.Duration // how often the line is redrawn
	// now and after are the clock: time.Now and time.After, or a test's
	// own, so that what is drawn does not depend on how busy the machine is.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	mu    sync.Mutex
	drawn bool // a status line is on screen and not yet ended
}

func newProgress(w io.Writer, enabled bool) *progress {
	return &progress{w: w, enabled: enabled, delay: time.Second, every: 200 * time.Millisecond,
		now: time.Now, after: time.After}
}

// stderrIsTerminal reports whether stderr is a terminal that understands
// the escape sequence that redraws the line (a dumb one does not).
func stderrIsTerminal() bool {
	return os.Getenv("TERM") != "dumb" && term.IsTerminal(int(os.Stderr.Fd()))
}

// step starts showing label and returns the function that ends the step.
func (p *progress) step(label string) (done func()) {
	return p.stepWith(label, nil)
}

// engineStep is step for an engine call that reports its own progress: the
// returned context carries a progress function (engine.WithProgress), and the line shows the
// stage and how much of it is done beside the elapsed time.
func (p *progress) engineStep(ctx context.Context, label string) (context.Context, func()) {
	var at atomic.Pointer[string]
	report := func(stage string, done, total int) {
		s := fmt.Sprintf("%s %d/%d", stage, done, total)
		switch {
		case total < 0: // not known before the end
			s = fmt.Sprintf("%s %d", stage, done)
		case total > 0:
			s = fmt.Sprintf("%s %d%% (%d/%d)", stage, 100*done/total, done, total)
		}
		at.Store(&s)
	}
	status := func() string {
		if s := at.Load(); s != nil {
			return *s
		}
		return ""
	}
	return engine.WithProgress(ctx, report), p.stepWith(label, status)
}

// stepWith is step with a status shown after the label while it runs.
func (p *progress) stepWith(label string, status func() string) (done func()) {
	if p == nil || !p.enabled {
		return func() {}
	}
	start := p.now()
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-stop:
			return
		case <-p.after(p.delay):
		}
		for {
			elapsed := seconds(p.now().Sub(start))
			line := fmt.Sprintf("%s… %s", label, elapsed)
			if status != nil {
				if st := status(); st != "" {
					line = fmt.Sprintf("%s… %s, %s", label, st, elapsed)
				}
			}
			p.draw(line, false)
			select {
			case <-stop:
				return
			case <-p.after(p.every):
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-finished
			if p.isDrawn() {
				p.draw(fmt.Sprintf("%s: done in %s", label, seconds(p.now().Sub(start))), true)
			}
		})
	}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// draw replaces the status line with s; final ends the line.
func (p *progress) draw(s string, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\x1b[K%s", s)
	p.drawn = !final
	if final {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) isDrawn() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drawn
}

// clear erases an unfinished status line, so that an error message starts
// at the beginning of a clean line.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
