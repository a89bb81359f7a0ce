package kafka

import "github.com/snapflow/snapflow/topology"

// NewSinkTask returns sink task subtask of a Sink with cfg, as the runtime
// makes it, for tests that drive its incarnations by hand.
func NewSinkTask[T any](cfg SinkConfig, subtask int, encode func(T) (key, value []byte)) topology.TwoPhaseSink[T] {
	return &sink[T]{cfg: cfg.withDefaults(), encode: encode, subtask: subtask}
}
