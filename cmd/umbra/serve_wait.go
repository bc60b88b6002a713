package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// serveLimitFlags are serve's bounds on requests (protocol.Limits) and how
// long it waits for its NATS system.
type serveLimitFlags struct {
	MaxWait        time.Duration `name:"max-wait" default:"2s" placeholder:"D" help:"the longest a request may wait for this node to apply the caller's writes; a longer wait asked is clamped to it"`
	MaxRequestMiB  int           `name:"max-request-mib" default:"8" placeholder:"MIB" help:"the largest request this node takes, in MiB (keep it at least the NATS max_payload)"`
	MaxInFlight    int           `name:"max-in-flight" default:"64" placeholder:"N" help:"the requests this node handles at once; more are refused as busy"`
	MaxInFlightMiB int64         `name:"max-in-flight-mib" default:"128" placeholder:"MIB" help:"what the requests in flight may take together, in MiB (each: twice its size, then its answer); past it requests are refused as busy"`
	MaxHits        int           `name:"max-hits" default:"262144" placeholder:"N" help:"the most hits one request's answer may hold (k × queries; a range search's answer)"`
	PendingMiB     int           `name:"pending-mib" default:"32" placeholder:"MIB" help:"what NATS may buffer for each shard this node answers before the node admits or refuses a request, in MiB"`
	Wait           time.Duration `name:"wait" default:"2m" placeholder:"D" help:"how long to wait at start for the NATS system (a cluster forming, JetStream without a leader yet), retrying, before giving up"`
}

func (f *serveLimitFlags) limits() (protocol.Limits, error) {
	switch {
	case f.MaxWait <= 0:
		return protocol.Limits{}, usagef("--max-wait %v: a duration above 0", f.MaxWait)
	case f.MaxRequestMiB <= 0:
		return protocol.Limits{}, usagef("--max-request-mib %d: a size in MiB above 0", f.MaxRequestMiB)
	case f.MaxInFlight <= 0:
		return protocol.Limits{}, usagef("--max-in-flight %d: a count above 0", f.MaxInFlight)
	case f.MaxInFlightMiB <= 0:
		return protocol.Limits{}, usagef("--max-in-flight-mib %d: a size in MiB above 0", f.MaxInFlightMiB)
	case f.MaxHits <= 0:
		return protocol.Limits{}, usagef("--max-hits %d: a count above 0", f.MaxHits)
	case f.PendingMiB <= 0:
		return protocol.Limits{}, usagef("--pending-mib %d: a size in MiB above 0", f.PendingMiB)
	case f.Wait < 0:
		return protocol.Limits{}, usagef("--wait %v: a duration, 0 to try once", f.Wait)
	case int64(f.MaxRequestMiB)*2 > f.MaxInFlightMiB:
		return protocol.Limits{}, usagef("--max-in-flight-mib %d is under twice --max-request-mib %d: the largest request could never be admitted", f.MaxInFlightMiB, f.MaxRequestMiB)
	}
	return protocol.Limits{MaxWait: f.MaxWait, MaxRequestBytes: f.MaxRequestMiB << 20, MaxInFlight: f.MaxInFlight,
		MaxInFlightBytes: f.MaxInFlightMiB << 20, MaxHits: f.MaxHits, PendingBytes: f.PendingMiB << 20}, nil
}

// startServing connects to the NATS system at url and starts the node,
// trying again while the system is not ready — no server up yet, a NATS
// cluster still forming, JetStream without a meta leader (its requests
// time out) — until wait has passed, saying each time what it waits for.
// Other failures (a store that cannot be opened, credentials refused) end
// it at once.
func startServing(ctx context.Context, connect func(context.Context) (*protocol.Conn, error), url string, cfg node.Config, wait time.Duration, logf func(string, ...any)) (*protocol.Conn, *node.Node, error) {
	start := time.Now()
	deadline := start.Add(wait)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		c, n, err := startOnce(ctx, connect, cfg)
		if err == nil {
			if attempt > 1 {
				logf("the NATS system is ready (after %d attempts, %v)", attempt, time.Since(start).Round(time.Millisecond))
			}
			return c, n, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !notReady(err) {
			return nil, nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil, fmt.Errorf("the NATS system at %s was not ready within %v (--wait), after %d attempts: %w", url, wait, attempt, err)
		}
		d := min(backoff, left)
		logf("waiting for the NATS cluster: %v (attempt %d; again in %v, giving up in %v)", err, attempt, d, left.Round(time.Second))
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(d):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func startOnce(ctx context.Context, connect func(context.Context) (*protocol.Conn, error), cfg node.Config) (*protocol.Conn, *node.Node, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	n, err := node.Start(ctx, c, cfg)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, n, nil
}

// notReady says whether err is the NATS system not being ready yet, which
// waiting may end, rather than a failure that waiting does not change.
func notReady(err error) bool {
	var apiErr *jetstream.APIError
	var netErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount), errors.As(err, &netErr):
		return true
	case errors.As(err, &apiErr):
		// 503: JetStream temporarily unavailable, too few resources;
		// 500: no leader to handle it yet, a stream offline; 10005: too
		// few servers yet for the replicas asked.
		return apiErr.Code == 503 || apiErr.Code == 500 || apiErr.ErrorCode == 10005
	}
	return false
}
