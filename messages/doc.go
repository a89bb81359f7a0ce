// Package messages holds snapflow's protobuf messages (package snapflow.v1):
// the data-path messages (record batches, barriers, end of input, credits),
// the checkpoint control messages exchanged between the coordinator and the
// tasks, and what the snapshot store keeps (manifests and task states).
//
// The Go code is generated from snapflow.proto by `make proto` and committed,
// so users need no protoc.
//
// The guide is docs/architecture.md (the protocol and the storage layout) in the repository.
package messages

//go:generate sh -c "cd .. && make proto"
