package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/storefile"
)

// This file holds what the store commands (build, add, delete, info,
// export, search --store) share: opening a store that must already exist,
// the one-line wording of the engine's store errors, and the ID and key
// files they read.

// storeMagic is how a store's base file begins (internal/storefile). build
// checks it before replacing an existing --out, so that a mistyped path
// never overwrites someone's vectors.
const storeMagic = "UMBRASTR"

// openStore opens the existing store at path for writing. engine.Open would
// create an empty store where none exists; a command that reads or changes
// a store must instead say that there is none.
func openStore(ctx context.Context, e *env, path string, cfg engine.Config) (*engine.Index, error) {
	return openExisting(ctx, e, path, cfg)
}

// openStoreReadOnly opens the existing store at path for reading only
// (info, search, export): it takes no lock, so it works while another
// process writes the store, and sees what that process had acknowledged.
func openStoreReadOnly(ctx context.Context, e *env, path string, cfg engine.Config) (*engine.Index, error) {
	cfg.ReadOnly = true
	return openExisting(ctx, e, path, cfg)
}

func openExisting(ctx context.Context, e *env, path string, cfg engine.Config) (*engine.Index, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no store at %s (create one with 'umbra build --data FILE --out %s')", path, path)
	case err != nil:
		return nil, fmt.Errorf("store %s: %s", path, cause(err))
	case fi.IsDir():
		return nil, fmt.Errorf("store %s is a directory: want a store file written by 'umbra build'", path)
	}
	ctx, done := e.progress.engineStep(ctx, "opening "+path)
	ix, err := engine.Open(ctx, path, cfg)
	done()
	if err != nil {
		if isDeviceError(err) {
			return nil, err // the caller names its --device
		}
		return nil, storeError(path, err)
	}
	return ix, nil
}

// isDeviceError reports whether err is about the GPU rather than the store.
func isDeviceError(err error) bool {
	var ae *engine.AdapterError
	return errors.As(err, &ae) || errors.Is(err, engine.ErrNoAdapter) ||
		errors.Is(err, engine.ErrNoGPUSupport) || errors.Is(err, engine.ErrGPU)
}

// storeError words an error the engine returned for the store at path.
func storeError(path string, err error) error {
	switch {
	case errors.Is(err, engine.ErrLocked):
		return fmt.Errorf("store %s is locked: another process has it open for writing (it holds %s.lock); try again when that process has finished", path, path)
	case errors.Is(err, engine.ErrBadStore):
		// The file layer says where, in which file: the store's own is
		// named already.
		var fe *storefile.FormatError
		if !errors.As(err, &fe) {
			return fmt.Errorf("store %s is damaged or not a store: %s", path, cause(err))
		}
		where := fmt.Sprintf("%s (byte %d)", fe.Section, fe.Offset)
		if fe.Path != path {
			where = fe.Path + ": " + where
		}
		return fmt.Errorf("store %s is damaged or not a store: %s: %v: %s", path, where, fe.Err, oneLine(fe.Detail))
	}
	return fmt.Errorf("store %s: %s", path, cause(err))
}

// closeStore closes ix, reporting a failure to sync the store's log as the
// command's error unless it already has one.
func closeStore(path string, ix *engine.Index, err *error) {
	if cerr := ix.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("store %s: closing: %s", path, cause(cerr))
	}
}

// readIDs reads the ID file given to flag: a 1-D int64 or uint64 .npy, or
// an .ivecs of one component, through host; anything else as text, one
// decimal ID per line (blank lines and surrounding spaces ignored).
func readIDs(ctx context.Context, e *env, flag, path string) ([]uint64, error) {
	return readIDsUpTo(ctx, e, flag, path, -1)
}

// moreIDsError: a text ID file holds more IDs than the vectors they pair
// with, found before the rest of it is read. It says where; moreIDs adds
// what the IDs pair with.
type moreIDsError struct{ where string }

func (e *moreIDsError) Error() string { return "more IDs than vectors: " + e.where }

// readIDsUpTo is readIDs of a file whose IDs pair with most vectors (most
// < 0: not known): a text file is read no further than one ID past most,
// so a wrong file given by mistake is refused without being read whole.
// The error is then a *moreIDsError.
func readIDsUpTo(ctx context.Context, e *env, flag, path string, most int) ([]uint64, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s %s is a directory: want an ID file (text, one ID per line, or a 1-D int64/uint64 .npy)", flag, path)
	}
	done := e.progress.step("loading " + path)
	defer done()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy", ".ivecs":
		ids, err := host.ReadIDsFile(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %s (an ID file is text, one ID per line, or a 1-D int64/uint64 .npy)", flag, cause(err))
		}
		return ids, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", flag, cause(err))
	}
	defer f.Close()
	ids := []uint64{}
	err = eachLine(ctx, f, func(n int, line string) error {
		s := strings.TrimSpace(line)
		if s == "" {
			return nil
		}
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s %s, line %d: %s", flag, path, n, badID(s))
		}
		if most >= 0 && len(ids) == most {
			return &moreIDsError{fmt.Sprintf("%s %s holds more than %s (line %d is one more)", flag, path, plural(most, "ID"), n)}
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// moreIDs words readIDsUpTo's *moreIDsError against the vectors the IDs
// pair with; other errors pass unchanged.
func moreIDs(err error, dataFlag, dataPath string, rows int) error {
	var more *moreIDsError
	if errors.As(err, &more) {
		return fmt.Errorf("%s; %s %s holds %s: want one ID per vector", more.where, dataFlag, dataPath, plural(rows, "vector"))
	}
	return err
}

// badID says why s is not an ID.
func badID(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' }) {
		return "binary data, not text: an ID file is text with one decimal ID per line, or a 1-D int64/uint64 .npy"
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return fmt.Sprintf("%s is negative: IDs are whole numbers from 0", s)
	}
	if _, err := strconv.ParseUint(s, 10, 64); errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("%s is beyond the largest ID (%d)", s, uint64(1<<64-1))
	}
	return fmt.Sprintf("%q is not an ID: want one decimal whole number per line (or a 1-D int64/uint64 .npy)", s)
}

// eachLine calls fn with each line of r and its number from 1, without its
// line end; a final line end does not start another line.
func eachLine(ctx context.Context, r io.Reader, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		return adv, bytes.TrimSuffix(tok, []byte("\r")), err
	})
	for n := 1; sc.Scan(); n++ {
		if n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(n, sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// rowsOf returns m's rows as slices into its data, for the engine calls
// that take one slice per vector.
func rowsOf(m *host.Matrix) [][]float32 {
	rows := make([][]float32, m.Rows)
	for i := range rows {
		rows[i] = m.Row(i)
	}
	return rows
}

// checkIDCount refuses an ID file that does not give one ID per vector.
func checkIDCount(idsFlag, idsPath string, n int, dataFlag, dataPath string, rows int) error {
	if n != rows {
		return fmt.Errorf("%s %s holds %s, %s %s holds %s: want one ID per vector",
			idsFlag, idsPath, plural(n, "ID"), dataFlag, dataPath, plural(rows, "vector"))
	}
	return nil
}

// writeError words the engine's refusal of a write of ids (from idsFlag)
// to the store at path.
func writeError(path, idsFlag string, err error) error {
	switch {
	case errors.Is(err, umbra.ErrDuplicateID):
		return fmt.Errorf("%s: %s; nothing was written", idsFlag, cause(err))
	case errors.Is(err, umbra.ErrIDExists):
		return fmt.Errorf("%s: an ID is already stored in %s; nothing was written (use --upsert to replace stored vectors)", idsFlag, path)
	case errors.Is(err, umbra.ErrNotFound):
		return fmt.Errorf("%s: %s; nothing was deleted", idsFlag, cause(err))
	case errors.Is(err, engine.ErrLocked), errors.Is(err, engine.ErrBadStore):
		return storeError(path, err)
	}
	return fmt.Errorf("store %s: %s", path, cause(err))
}

// storedAlready refuses IDs that are stored in ix, before AddWithIDs would:
// the engine's own message suggests its API, this one the flag.
func storedAlready(ctx context.Context, t *target, idsFlag, idsPath string, ids []uint64) error {
	held, err := storedIDs(ctx, t, ids)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	var found []uint64
	for _, id := range ids {
		if held[id] {
			found = append(found, id)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s: %s already stored in %s; nothing was written (use --upsert to replace stored vectors)",
		idsFlag, idsPath, someIDs(found), t.label)
}

// someIDs names a few IDs: "ID 7", "3 IDs (4, 9, 12)", "40 IDs (4, 9, 12, …)".
func someIDs(ids []uint64) string {
	if len(ids) == 1 {
		return fmt.Sprintf("ID %d is", ids[0])
	}
	const show = 5
	parts := make([]string, 0, show+1)
	for i, id := range ids {
		if i == show {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, strconv.FormatUint(id, 10))
	}
	return fmt.Sprintf("%d IDs (%s) are", len(ids), strings.Join(parts, ", "))
}
