package core

// Hit is one result of a backend's search: Row is the row index in the
// slab searched (or in the scores selected from), Score the metric's value
// for that row. The engine turns rows into IDs at its boundary.
type Hit struct {
	Row   int
	Score float32
}
