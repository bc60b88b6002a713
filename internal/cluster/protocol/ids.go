package protocol

import (
	"context"
	"encoding/json"
	"fmt"
)

// IDs the cluster assigns come from blocks. The collection's counter (key
// name in umbra_counters) is where the next unreserved block starts; a
// handle reserves a block of IDBlock IDs with one compare-and-set and
// hands them out itself, so concurrent writers do not meet on one key at
// every call. IDs a block leaves unused are never given: IDs are unique,
// not dense.
//
// The floor (key name.floor) is past every ID a caller has named in an
// Add or Upsert (WithIDs). A call that assigns IDs reads it first (one
// read, no write) and takes its IDs past it, skipping the part of its
// block below it; a block is reserved past it too. So an assigned ID is
// never one a caller named in a call that ended before this one began,
// as locally, although another handle's block reserved earlier may still
// hold it.

// leaderGet reads key of bucket from its stream's leader: the value and
// its revision; absent, nil and 0; deleted, nil and the delete's
// revision.
func (c *Conn) LeaderGet(ctx context.Context, bucket, key string) ([]byte, uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + key})
	msg, err := c.NC.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
			Hdrs []byte `json:"hdrs"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", key, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == 10037 || resp.Error.Code == 404 { // no message found
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("reading %s: %s (code %d)", key, resp.Error.Description, resp.Error.Code)
	}
	if resp.Message == nil {
		return nil, 0, fmt.Errorf("reading %s: empty answer", key)
	}
	if len(resp.Message.Hdrs) > 0 && len(resp.Message.Data) == 0 {
		return nil, resp.Message.Seq, nil // a delete marker
	}
	return resp.Message.Data, resp.Message.Seq, nil
}
