package main

import (
	"fmt"
	"regexp"

	"github.com/umbravec/umbra/cluster"
)

// idempotencyFlag is the cluster writes' --idempotency-key.
type idempotencyFlag struct {
	IdempotencyKey string `name:"idempotency-key" placeholder:"K" help:"with --cluster: the write's idempotency key (1 to 128 letters, digits, '-' or '_'): run again with the same key within the collection's duplicate window (10 minutes by default), the write is applied once and the first run's outcome reported. Without it a fresh key is made and printed"`
}

var idempotencyKeyRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (f *idempotencyFlag) checkKey(clusterURL string) error {
	switch {
	case f.IdempotencyKey == "":
		return nil
	case clusterURL == "":
		return usagef("--idempotency-key needs --cluster: a store's writes are not retried")
	case !idempotencyKeyRule.MatchString(f.IdempotencyKey):
		return usagef("--idempotency-key %q: 1 to 128 letters, digits, '-' or '_'", f.IdempotencyKey)
	}
	return nil
}

// key is the write's key: the one given, or a fresh one, printed on
// stderr before the write starts so that it can be retried with it.
func (f *idempotencyFlag) key(e *env) string {
	if f.IdempotencyKey != "" {
		return f.IdempotencyKey
	}
	k := cluster.NewIdempotencyKey()
	fmt.Fprintf(e.stderr, "idempotency key %s (if this write fails or is cut short, run it again with --idempotency-key %s: it is applied once)\n", k, k)
	return k
}

// retryWith names the key in a cluster write's error.
func retryWith(err error, key string) error {
	return fmt.Errorf("%w (to retry, applied once: --idempotency-key %s)", err, key)
}
