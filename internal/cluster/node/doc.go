// Package node is an umbra cluster node and the NATS server umbra embeds:
// a node holds a replica of shards of every collection (or those placement
// assigns it), applies each shard's stream into an engine store in order,
// snapshots it to the Object Store, and answers the client's requests
// (searches, gets, counts, lookups, the outcomes of writes) within its
// limits; StartEmbedded runs a NATS server with JetStream and the two
// roles' credentials (node and client). `umbra serve` is its command.
//
// It is apart from the client (package cluster) so that a client program
// links neither the engine and its GPU binding nor the NATS server; both
// speak internal/cluster/protocol.
package node
