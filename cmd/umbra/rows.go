package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/host"
)

// fileRows is a data file opened to be streamed into an index
// (a RowSource for engine.Index.Add and Upsert): its header is read and checked, its rows are
// read as the index stores them.
type fileRows struct {
	*host.MatrixReader
	flag, path string
	err        error // the file's own failure, once ReadRows met one
}

// openRows opens path for a streamed Add, naming the flag in errors as
// loadMatrix does.
func openRows(ctx context.Context, flagName, path string) (*fileRows, error) {
	if err := notDir(flagName, path); err != nil {
		return nil, err
	}
	r, err := host.OpenMatrixFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", flagName, cause(err))
	}
	return &fileRows{MatrixReader: r, flag: flagName, path: path}, nil
}

func (f *fileRows) ReadRows(dst []float32) (int, error) {
	n, err := f.MatrixReader.ReadRows(dst)
	if err != nil && !errors.Is(err, io.EOF) {
		f.err = err
	}
	return n, err
}

// sourceError words an Add or Upsert error that the file caused (malformed,
// truncated, unreadable) as loadMatrix would have; nil when the file was
// not at fault.
func (f *fileRows) sourceError(err error) error {
	if f.err != nil && errors.Is(err, umbra.ErrSource) {
		return fmt.Errorf("%s: %s", f.flag, cause(f.err))
	}
	return nil
}

// label is what the progress line calls the rows: "123 rows", or, when
// the file cannot tell before its end (a pipe), "the rows of FILE".
func (f *fileRows) label() string {
	if n := f.Rows(); n >= 0 {
		return fmt.Sprintf("%d rows", n)
	}
	return "the rows of " + f.path
}
