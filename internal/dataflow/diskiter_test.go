package dataflow

// iterRec is a record of the iteration tests and benchmark: what the
// process function does to the map of Key.
type iterRec struct {
	Key, UK, V int64
	Op         int
}
