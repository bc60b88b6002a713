package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/chroma"
)

// httpFlags are serve's Chroma form: --http ADDR serves Chroma's v2 HTTP
// API (internal/chroma) from stores under --dir, or from a cluster's
// collections with --cluster, in place of running a cluster node.
type httpFlags struct {
	HTTP           string        `name:"http" placeholder:"ADDR" help:"serve Chroma's v2 HTTP API on ADDR (Chroma's own port: 127.0.0.1:8000) from one umbra store per collection under --dir, instead of running a cluster node"`
	TokenFile      string        `name:"token-file" placeholder:"FILE" help:"with --http: every request must carry the token in FILE (x-chroma-token: T or Authorization: Bearer T), else 401; without it --http listens on loopback only"`
	AllowReset     bool          `name:"allow-reset" help:"with --http: let POST /api/v2/reset remove every tenant, database and collection but the defaults"`
	ClusterURL     string        `name:"cluster" placeholder:"URL" help:"with --http: serve the collections of the umbra cluster at URL (with --creds, --tls-…) instead of stores under --dir (which then keeps only the collection registry)"`
	MaxBodyMiB     int64         `name:"max-body-mib" default:"128" placeholder:"MIB" help:"with --http: the largest request body, in MiB (413 beyond)"`
	MaxBatchSize   int           `name:"max-batch-size" default:"5461" placeholder:"N" help:"with --http: the most records one add, upsert, update or delete by ids may carry, reported as pre-flight-checks' max_batch_size"`
	RequestTimeout time.Duration `name:"request-timeout" default:"60s" placeholder:"D" help:"with --http: the longest one request may work (504 beyond)"`
	Precision      string        `name:"precision" placeholder:"P" help:"with --http and --dir (default int8; a cluster's replicas scan float32, and --cluster refuses it): the copy of the vectors that a new collection's searches scan (f32, f16 or int8); every answer is the exact float32 one at each (rows the compressed scan cannot rule out are scored again in float32), int8 reading about 4x fewer bytes per query for a quarter more memory. A collection keeps the precision it was created with"`
	MaxRequests    int           `name:"max-requests" default:"64" placeholder:"N" help:"with --http: the requests handled at once; more are answered 429"`
	ServerTiming   bool          `name:"server-timing" help:"with --http: every answer carries a Server-Timing header with the time each stage of the request took inside the server (reading, decoding, the search and its engine stages, encoding), to tell the server's share of a client's latency from the rest"`
}

// given names the first --http-only flag given without --http.
func (f *httpFlags) httpOnly() string {
	switch {
	case f.TokenFile != "":
		return "--token-file"
	case f.AllowReset:
		return "--allow-reset"
	case f.ClusterURL != "":
		return "--cluster"
	case f.Precision != "":
		return "--precision"
	case f.ServerTiming:
		return "--server-timing"
	}
	return ""
}

// loopbackOnly says addr's host is a loopback address (or a name that
// resolves only to such).
func loopbackOnly(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("--http %s: want HOST:PORT (e.g. 127.0.0.1:8000): %v", addr, err)
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, usagef("--http %s: cannot resolve %s: %v", addr, host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// runHTTP serves Chroma's API until ctx ends.
func (s *serveCmd) runHTTP(ctx context.Context, e *env, device engine.Device) error {
	f := &s.httpFlags
	switch {
	case s.NATS != "":
		return usagef("--nats is for a cluster node; with --http, --cluster URL names the cluster to serve")
	case s.Place || s.Rotate:
		return usagef("--placement and --rotate-creds are for a cluster node, not --http")
	case f.MaxBodyMiB <= 0:
		return usagef("--max-body-mib %d: a size in MiB above 0", f.MaxBodyMiB)
	case f.MaxBatchSize <= 0:
		return usagef("--max-batch-size %d: a count above 0", f.MaxBatchSize)
	case f.RequestTimeout <= 0:
		return usagef("--request-timeout %v: a duration above 0", f.RequestTimeout)
	case f.MaxRequests <= 0:
		return usagef("--max-requests %d: a count above 0", f.MaxRequests)
	}
	if f.ClusterURL == "" {
		if g := s.natsFlags.given(); g != "" {
			return usagef("%s is for --cluster", g)
		}
	} else if err := s.natsFlags.validate(); err != nil {
		return err
	}
	var token string
	if f.TokenFile != "" {
		b, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" || strings.ContainsAny(token, "\r\n") {
			return fmt.Errorf("--token-file %s: want one line holding the token, not empty", f.TokenFile)
		}
	} else {
		lo, err := loopbackOnly(f.HTTP)
		if err != nil {
			return err
		}
		if !lo {
			return usagef("--http %s listens beyond loopback: give --token-file FILE so that every request must carry its token, or listen on 127.0.0.1", f.HTTP)
		}
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	var backend chroma.Backend
	if f.ClusterURL != "" {
		if f.Precision != "" {
			return usagef("--precision %s: a cluster's replicas scan float32; --precision applies to the stores of --dir alone", f.Precision)
		}
		c, err := s.natsFlags.connect(ctx, f.ClusterURL, false)
		if err != nil {
			return err
		}
		defer c.Close()
		backend = chroma.NewClusterBackend(c)
	} else {
		if f.Precision == "" {
			f.Precision = "int8"
		}
		prec, err := umbra.ParsePrecision(string(f.Precision))
		if err != nil {
			return usagef("--precision %s: %v", f.Precision, err)
		}
		backend = &chroma.Stores{Dir: s.Dir, Config: engine.Config{Device: device, Precision: prec}}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(e.stderr, "umbra serve: "+format+"\n", args...) }
	srv, err := chroma.New(ctx, chroma.Config{Dir: s.Dir, Backend: backend, Token: token, AllowReset: f.AllowReset,
		MaxBatchSize: f.MaxBatchSize, MaxBodyBytes: f.MaxBodyMiB << 20, RequestTimeout: f.RequestTimeout,
		MaxInFlight: f.MaxRequests, ServerTiming: f.ServerTiming, Logf: logf})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", f.HTTP)
	if err != nil {
		return fmt.Errorf("--http %s: %w", f.HTTP, err)
	}
	hs := srv.HTTPServer()
	auth := "no token (loopback only)"
	if token != "" {
		auth = "token from " + f.TokenFile
	}
	fmt.Fprintf(e.stdout, "umbra serve: Chroma API on http://%s (%s; %s)\n", ln.Addr(), backend.Describe(), auth)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
