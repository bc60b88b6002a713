package umbra

// Hit is one search result: the vector's ID, its score (cosine similarity,
// inner product, or squared L2 distance, as the Metric says) and its key,
// if it has one. Hits come best first; equal scores go to the lower ID.
type Hit struct {
	ID    uint64
	Score float32
	// Key is the row's key when it was stored under one (WithKeys), and
	// empty otherwise.
	Key string
	// Payload is the row's payload (its bytes, as stored) for a search
	// given WithPayload, and empty otherwise or when the row has none. A
	// string keeps Hit comparable and lets hits share it without a copy.
	Payload string
}
