package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// nodesWait is how long info --cluster collects the nodes' stats.
const nodesWait = 750 * time.Millisecond

// nodeJSON is one node's request counts and limits in info --cluster
// --json (cmd/umbra/README.md).
type nodeJSON struct {
	Node          string         `json:"node"`
	Host          string         `json:"host"`
	Shards        int            `json:"shards"`
	InFlight      int            `json:"in_flight"`
	InFlightBytes int64          `json:"in_flight_bytes"`
	Answered      uint64         `json:"answered"`
	Behind        uint64         `json:"behind"`
	Failed        uint64         `json:"failed"`
	Refused       refusedJSON    `json:"refused"`
	ClampedWaits  uint64         `json:"clamped_waits"`
	Dropped       uint64         `json:"dropped"`
	Limits        nodeLimitsJSON `json:"limits"`
	MemoryBound   int64          `json:"memory_bound"`
}

type refusedJSON struct {
	Total uint64 `json:"total"`
	protocol.RefusedStats
}

type nodeLimitsJSON struct {
	MaxWaitMs        int64 `json:"max_wait_ms"`
	MaxRequestBytes  int   `json:"max_request_bytes"`
	MaxInFlight      int   `json:"max_in_flight"`
	MaxInFlightBytes int64 `json:"max_in_flight_bytes"`
	MaxHits          int   `json:"max_hits"`
	PendingMsgs      int   `json:"pending_msgs"`
	PendingBytes     int   `json:"pending_bytes"`
}

// clusterNodes asks every node for its stats.
func clusterNodes(ctx context.Context, c *cluster.Client) ([]nodeJSON, error) {
	stats, err := protocol.FetchStats(ctx, c.Conn(), nodesWait)
	if err != nil {
		return nil, fmt.Errorf("nodes' stats: %w", err)
	}
	out := make([]nodeJSON, 0, len(stats))
	for _, s := range stats {
		l := s.Limits
		out = append(out, nodeJSON{Node: s.Node, Host: s.Host, Shards: s.Shards, InFlight: s.InFlight, InFlightBytes: s.InFlightBytes,
			Answered: s.Answered, Behind: s.Behind, Failed: s.Failed, Refused: refusedJSON{Total: s.Refused.Total(), RefusedStats: s.Refused},
			ClampedWaits: s.ClampedWaits, Dropped: s.Dropped, MemoryBound: s.MemoryBound,
			Limits: nodeLimitsJSON{MaxWaitMs: l.MaxWait.Milliseconds(), MaxRequestBytes: l.MaxRequestBytes, MaxInFlight: l.MaxInFlight,
				MaxInFlightBytes: l.MaxInFlightBytes, MaxHits: l.MaxHits, PendingMsgs: l.PendingMsgs, PendingBytes: l.PendingBytes}})
	}
	return out, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// writeNodes prints the nodes' stats as text.
func writeNodes(w io.Writer, nodes []nodeJSON) {
	if len(nodes) == 0 {
		fmt.Fprintf(w, "nodes: none answered within %v\n", nodesWait)
		return
	}
	fmt.Fprintf(w, "nodes: %d\n", len(nodes))
	for _, n := range nodes {
		r := n.Refused
		fmt.Fprintf(w, "  node %s (%s): %d shards; requests: %d answered, %d behind, %d failed, %d refused (in flight %d, bytes in flight %d, request size %d, hits %d, reply size %d, closing %d), %d waits clamped, %d dropped by NATS; now %d in flight (%s)\n",
			n.Node, n.Host, n.Shards, n.Answered, n.Behind, n.Failed, r.Total, r.InFlight, r.InFlightBytes, r.RequestBytes, r.Hits, r.ReplyBytes, r.Closing,
			n.ClampedWaits, n.Dropped, n.InFlight, mib(n.InFlightBytes))
		l := n.Limits
		fmt.Fprintf(w, "    limits: wait %v, request %s, %d requests and %s in flight, %d hits an answer, NATS buffer %s a shard; memory bound %s beyond the stores\n",
			time.Duration(l.MaxWaitMs)*time.Millisecond, mib(int64(l.MaxRequestBytes)), l.MaxInFlight, mib(l.MaxInFlightBytes), l.MaxHits,
			mib(int64(l.PendingBytes)), mib(n.MemoryBound))
	}
}

// runNodes is info --cluster without --collection: the nodes alone.
func (c *infoCmd) runNodes(ctx context.Context, e *env) error {
	cl, err := c.connect(ctx, c.Cluster, false)
	if err != nil {
		return err
	}
	defer cl.Close()
	nodes, err := clusterNodes(ctx, cl)
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(e.stdout, struct {
			Nodes []nodeJSON `json:"nodes"`
		}{nodes})
	}
	writeNodes(e.stdout, nodes)
	return nil
}
