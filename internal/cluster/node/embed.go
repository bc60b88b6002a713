package node

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig describes an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	// Listen is HOST:PORT for clients; a loopback host only (the embedded
	// server has no TLS). Port 0 picks a free one. Default 127.0.0.1:4222.
	Listen string
	// Dir keeps JetStream's files (under Dir/nats).
	Dir string
	// Creds is the directory of the server's credentials (default
	// Dir/creds), made on first start and read after (LoadCreds):
	// the server accepts only the node and client users they name, each
	// with its role's permissions, never an anonymous client, and on its
	// routes only servers that give the route secret. Servers of one
	// NATS cluster share one directory.
	Creds string
	// Name is the server's name (default "umbra").
	Name string
	// ClusterName, ClusterListen and Routes join several embedded servers
	// into one NATS cluster (tests and loopback measurements): every
	// server the same ClusterName, its own ClusterListen (loopback), and
	// Routes the others' nats-route://HOST:PORT, and all the same Creds
	// (a route gives the route secret kept there; without it, it is
	// refused).
	ClusterName   string
	ClusterListen string
	Routes        []string
}

// EmbeddedMaxPayload is the embedded server's max payload: 8 MiB, what
// NATS advises as the most, so that a row with a 1 MiB payload goes in one
// message. An external server needs max_payload raised (to 2 MB or more)
// for such rows; under its default of 1 MB they are refused with
// engine.ErrTooLarge before anything is written.
const EmbeddedMaxPayload = 8 << 20

// Embedded is an in-process nats-server.
type Embedded struct {
	s     *server.Server
	creds *CredsDir
}

func loopbackHostPort(what, hp string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: %w", what, hp, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: bad port", what, hp)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", 0, fmt.Errorf("%s %q: the embedded NATS server listens on loopback only (it has no TLS); for a network, run nats-server yourself and give its URL", what, hp)
	}
	return host, port, nil
}

// StartEmbedded starts a nats-server with JetStream in this process, its
// streams written with sync always (every write fsynced before it is
// acknowledged: JetStream's default syncs every 2 minutes).
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	opts, creds, err := EmbeddedOptions(cfg)
	if err != nil {
		return nil, err
	}
	e, err := StartServer(opts)
	if err != nil {
		return nil, err
	}
	e.creds = creds
	return e, nil
}

// embeddedOptions are the nats-server options StartEmbedded runs with.
func EmbeddedOptions(cfg EmbeddedConfig) (*server.Options, *CredsDir, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	if cfg.Dir == "" {
		return nil, nil, errors.New("embedded NATS server: no directory")
	}
	if cfg.Creds == "" {
		cfg.Creds = filepath.Join(cfg.Dir, "creds")
	}
	creds, err := LoadCreds(cfg.Creds)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = "umbra"
	}
	host, port, err := loopbackHostPort("listen address", cfg.Listen)
	if err != nil {
		return nil, nil, err
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName:   cfg.Name,
		Host:         host,
		Port:         port,
		JetStream:    true,
		StoreDir:     filepath.Join(cfg.Dir, "nats"),
		SyncAlways:   true,
		SyncInterval: 2 * time.Minute, // unused under SyncAlways; set so the default is not applied
		NoSigs:       true,
		NoLog:        true,
		// A row with a payload of engine.DefaultMaxPayloadBytes (1 MiB)
		// must fit one message beside its vector and metadata: NATS's
		// default max payload is 1 MB.
		MaxPayload: EmbeddedMaxPayload,
		// Only the two users: no anonymous client (no NoAuthUser), each
		// user limited to its role's subjects (auth.go).
		Nkeys: []*server.NkeyUser{
			{Nkey: creds.node, Permissions: NodePermissions()},
			{Nkey: creds.client, Permissions: ClientPermissions()},
		},
	}
	if cfg.ClusterName != "" {
		chost, cport, err := loopbackHostPort("cluster address", cfg.ClusterListen)
		if err != nil {
			return nil, nil, err
		}
		if cport == 0 {
			cport = server.RANDOM_PORT
		}
		// A route is another server: without the secret, anyone local
		// could join as one and see every message.
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: chost, Port: cport,
			Username: routeUser, Password: creds.RouteSecret}
		for _, r := range cfg.Routes {
			for _, u := range server.RoutesFromStr(r) {
				if u.User == nil {
					u.User = url.UserPassword(routeUser, creds.RouteSecret)
				}
				opts.Routes = append(opts.Routes, u)
			}
		}
	}
	return opts, creds, nil
}

func StartServer(opts *server.Options) (*Embedded, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	go s.Start()
	// Generous: JetStream recovers its file store before it listens, and
	// a loaded machine (CI's race run starts many servers at once) has
	// taken over 30 s to get there.
	if !s.ReadyForConnections(2 * time.Minute) {
		s.Shutdown()
		return nil, errors.New("embedded NATS server did not start within 2 minutes")
	}
	return &Embedded{s: s}, nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.s.ClientURL() }

// Creds is the server's credentials directory.
func (e *Embedded) Creds() *CredsDir { return e.creds }

// NodeCreds is the node role's credentials file (Credentials(file) with
// AsNode() for a node's connection).
func (e *Embedded) NodeCreds() string { return e.creds.NodeFile() }

// ClientCreds is the client role's credentials file, for applications.
func (e *Embedded) ClientCreds() string { return e.creds.ClientFile() }

// Server is the nats-server itself.
func (e *Embedded) Server() *server.Server { return e.s }

// Close shuts the server down and waits for it.
func (e *Embedded) Close() {
	e.s.Shutdown()
	e.s.WaitForShutdown()
}
