// Package cluster is the client of an umbra cluster: collections whose
// shards are NATS JetStream streams (each shard's write-ahead log) held by
// umbra nodes (umbra serve), which search their replicas and answer.
//
// A *Collection is an umbra.Collection, like an engine store: the same
// writes (Add, Upsert, Delete over an umbra.RowSource, named by IDs or
// keys, with metadata and payloads), the same searches (exact over every
// shard, merged with ties by lower ID, or an error naming the shards that
// did not answer), Get, Count and Summary, the same options meaning the
// same thing and the same errors; an option a collection cannot honour
// (Approximate, AllowFunc) is refused by name. Besides, a handle reads its
// own writes (its Token), writes may carry an idempotency key and return
// before they are applied (umbra.IdempotencyKey, umbra.NoWait), and a
// search may ask any replica (umbra.Eventual).
//
// The package links nats.go and nothing of the node: not the embedded NATS
// server, not the engine or its GPU binding. Every connection is
// authenticated (Credentials, TLS, ClientCert), every message checksummed,
// every request bounded by the nodes (docs/cluster.md).
package cluster
