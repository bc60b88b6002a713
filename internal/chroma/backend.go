package chroma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// Stores is the Backend of a directory: one umbra store per collection,
// DIR/collections/ID/store, every write fsynced before it is
// acknowledged.
type Stores struct {
	Dir string
	// Config is every store's engine configuration but its Dim and
	// Metric (Device, Workers, Limits, Coalesce). Its Precision is that
	// of the stores Create makes; a store Open opens keeps its own.
	Config engine.Config
}

func (b *Stores) path(id string) string { return filepath.Join(b.Dir, "collections", id) }

func (b *Stores) Open(ctx context.Context, id string) (umbra.Collection, error) {
	p := filepath.Join(b.path(id), "store")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	cfg := b.Config
	cfg.Dim, cfg.Metric, cfg.Precision = 0, 0, 0
	ix, err := engine.Open(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	return ix, nil
}

func (b *Stores) Create(ctx context.Context, id string, dim int, m umbra.Metric) (umbra.Collection, error) {
	dir := b.path(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := b.Config
	cfg.Dim, cfg.Metric = dim, m
	ix, err := engine.Open(ctx, filepath.Join(dir, "store"), cfg)
	if err != nil {
		return nil, err
	}
	// A first checkpoint writes the base file, so the store exists (with
	// its dimension and metric) once Create returns.
	if err := ix.Checkpoint(ctx); err != nil {
		ix.Close()
		return nil, fmt.Errorf("creating the store of collection %s: %w", id, err)
	}
	// The new directories' entries, up to DIR, are made durable too: a
	// crash must not lose the store of a write already acknowledged.
	for _, d := range []string{dir, filepath.Dir(dir), b.Dir} {
		if err := syncDir(d); err != nil {
			ix.Close()
			return nil, err
		}
	}
	return ix, nil
}

func (b *Stores) Drop(ctx context.Context, id string, c umbra.Collection) error {
	if c != nil {
		c.Close()
	}
	return os.RemoveAll(b.path(id))
}

func (b *Stores) Keep(ctx context.Context, ids []string) error {
	ents, err := os.ReadDir(filepath.Join(b.Dir, "collections"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() && !slices.Contains(ids, e.Name()) && uuidRule.MatchString(e.Name()) {
			if err := os.RemoveAll(filepath.Join(b.Dir, "collections", e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Stores) Describe() string {
	return "one umbra store per collection under " + filepath.Join(b.Dir, "collections")
}
