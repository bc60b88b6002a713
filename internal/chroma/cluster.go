package chroma

import (
	"context"
	"errors"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/meta"
)

// clusterBackend keeps each Chroma collection's records in a collection of
// an umbra cluster, named "chroma-" and the Chroma id without dashes; the
// server's directory keeps the registry (names, metadata, configuration).
// The cluster has no way to drop a collection: deleting a Chroma
// collection deletes every record of its cluster collection, which is
// left, empty, in the cluster (docs/chroma.md).
type clusterBackend struct {
	c *cluster.Client
}

// NewClusterBackend serves collections of the cluster c is connected to.
func NewClusterBackend(c *cluster.Client) Backend { return &clusterBackend{c: c} }

func clusterName(id string) string { return "chroma-" + strings.ReplaceAll(id, "-", "") }

func (b *clusterBackend) Open(ctx context.Context, id string) (umbra.Collection, error) {
	col, err := b.c.Open(ctx, clusterName(id))
	if errors.Is(err, cluster.ErrNoCollection) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return col, nil
}

func (b *clusterBackend) Create(ctx context.Context, id string, dim int, m umbra.Metric) (umbra.Collection, error) {
	col, err := b.c.Create(ctx, clusterName(id), cluster.CollectionConfig{Dim: dim, Metric: m})
	if err != nil {
		return nil, err
	}
	return col, nil
}

func (b *clusterBackend) Drop(ctx context.Context, id string, c umbra.Collection) error {
	if c == nil {
		return nil
	}
	defer c.Close()
	const page = 4096
	for {
		recs, err := c.Get(ctx, umbra.Selection{Limit: page})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		ids := make([]uint64, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		if err := c.Delete(ctx, umbra.WithIDs(ids...)); err != nil {
			return err
		}
		if n, err := c.Count(ctx, meta.Filter{}); err != nil || n == 0 {
			return err
		}
	}
}

// Keep leaves the cluster as it is: its collections are not this
// server's alone to remove.
func (b *clusterBackend) Keep(ctx context.Context, ids []string) error { return nil }

func (b *clusterBackend) Describe() string { return "the collections of an umbra cluster" }
