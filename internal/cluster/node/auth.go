package node

import (
	"slices"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// Who may do what on an umbra cluster's NATS system. Two roles:
//
//   - node: umbra's nodes (umbra serve) and operator commands: umbra's
//     subjects, the JetStream API, umbra's buckets and its snapshot store.
//   - client: applications. They write through the shards' write subjects
//     (JetStream stores what they publish there), search and look up
//     through the query subjects, create collections and record new
//     metadata fields by asking a node (umbra.admin.*), read the
//     collection records and move the ID counters. They cannot subscribe
//     to umbra's subjects (to read others' requests or answer them),
//     read a shard's stream or the snapshots, purge, delete or change any
//     stream, list the streams, or write any bucket but umbra_counters.
//
// The embedded server gives these permissions to its two nkey users; an
// external one is configured from docs/nats/auth.conf, which a test
// checks against these lists.

// The node role's subjects.
var (
	nodePublish = []string{
		"umbra.>",
		"_INBOX.>",                      // replies to clients
		protocol.NodeInboxPrefix + ".>", // replies to nodes (and operators on a node's connection)
		"$JS.API.>",
		"$JS.ACK.>",
		"$JS.FC.>", // flow control of ordered consumers (bucket watches, object reads)
		"$KV." + protocol.BucketCollections + ".>",
		"$KV." + protocol.BucketCounters + ".>",
		"$KV." + protocol.BucketSnapshots + ".>",
		"$KV." + BucketNodes + ".>",
		"$KV." + BucketPlacement + ".>",
		"$KV." + protocol.BucketRepairs + ".>", // an operator's skip of a message (umbra repair)
		"$KV." + protocol.BucketCalls + ".>",
		"$O." + protocol.ObjectSnapshots + ".>",
	}
	nodeSubscribe = []string{
		"umbra.>",
		"_INBOX.>", // operator commands on node credentials
		protocol.NodeInboxPrefix + ".>",
	}
)

// The client role's subjects.
var (
	clientPublish = []string{
		"umbra.w.>", // writes: each shard's stream stores its subject's messages
		"umbra.q.>", // searches, lookups, outcomes, row counts
		protocol.AdminCreateSubject,
		protocol.AdminSchemaSubject,
		"$JS.API.STREAM.INFO.*", // stream state (umbra info), and opening the buckets
		"$JS.API.DIRECT.GET.KV_" + protocol.BucketCollections + ".>",
		"$JS.API.DIRECT.GET.KV_" + protocol.BucketCounters + ".>",
		"$JS.API.STREAM.MSG.GET.KV_" + protocol.BucketCounters, // the ID floor, read from the leader
		"$KV." + protocol.BucketCounters + ".>",                // ID blocks and the floor (compare-and-set)
		"$JS.API.DIRECT.GET.KV_" + protocol.BucketCalls + ".>", // writes with an idempotency key
		"$KV." + protocol.BucketCalls + ".>",
		protocol.StatsSubject, // every node's request counts and limits (umbra info)
	}
	clientSubscribe = []string{"_INBOX.>"}
)

func permissions(pub, sub []string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(pub)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(sub)},
	}
}

// NodePermissions and ClientPermissions are the roles' NATS permissions,
// as the embedded server gives them (and docs/nats/auth.conf writes
// them).
func NodePermissions() *server.Permissions   { return permissions(nodePublish, nodeSubscribe) }
func ClientPermissions() *server.Permissions { return permissions(clientPublish, clientSubscribe) }
