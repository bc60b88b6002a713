package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/umbravec/umbra/internal/bench"
)

// writeJSON writes the report to path, or to stdout for "-".
func writeJSON(path string, stdout io.Writer, rep *bench.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// progress shows one updating status line on stderr, and only when stderr
// is a terminal: piped or captured output stays clean.
type progress struct {
	w     io.Writer
	on    bool
	shown bool
	start time.Time
}

func newProgress(stderr io.Writer) *progress {
	p := &progress{w: stderr, start: time.Now()}
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

func (p *progress) show(msg string) {
	if !p.on {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K[%5.1fs] %s", time.Since(p.start).Seconds(), msg)
	p.shown = true
}

// done clears the status line.
func (p *progress) done() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
