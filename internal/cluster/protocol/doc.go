// Package protocol is what an umbra cluster's client (package cluster) and
// its nodes (internal/cluster/node) share, so that neither imports the
// other: the wire format (framed, checksummed write messages, requests and
// replies, and the bounds a node reads before admitting one), the layout
// of streams, subjects and buckets, a collection's record, the connection
// with its buckets and the server's refusals (Conn, Dial), the outcome
// codes of applied writes, the node limits and stats, and an operator's
// repair of a shard stopped at a message (Repairer).
//
// It links nats.go and the vocabulary packages, never the engine or the
// NATS server.
package protocol
