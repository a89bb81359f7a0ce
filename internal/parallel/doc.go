// Package parallel runs a bounded number of calls at once over an index
// range, stopping at the first error: the reads and writes of many
// objects (task states, database files) that the store serves best a few
// at a time.
package parallel
