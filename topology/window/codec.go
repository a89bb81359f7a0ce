package window

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/topology"
)

// stateCodec stores one key's open windows: the number of panes, then per
// pane its start and end (varints) and its accumulator (length-prefixed,
// in the aggregation's codec); then firedThrough.
type stateCodec[A any] struct{ acc topology.Codec[A] }

// CodecID implements topology.IdentifiedCodec: a changed accumulator codec
// is a changed state.
func (c stateCodec[A]) CodecID() string {
	if id, ok := c.acc.(topology.IdentifiedCodec); ok {
		return "snapflow.window/" + id.CodecID()
	}
	return fmt.Sprintf("snapflow.window/%T", c.acc)
}

func (c stateCodec[A]) Append(dst []byte, st *keyState[A]) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(st.panes)))
	for _, p := range st.panes {
		dst = binary.AppendVarint(dst, p.start)
		dst = binary.AppendVarint(dst, p.end)
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		if dst, err = c.acc.Append(dst, p.acc); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return binary.AppendVarint(dst, st.firedThrough), nil
}

var errCorrupt = errors.New("window: corrupt window state")

func (c stateCodec[A]) Decode(b []byte) (*keyState[A], error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[k:]
	st := &keyState[A]{panes: make([]pane[A], 0, n)}
	for range n {
		var p pane[A]
		if p.start, k = binary.Varint(b); k <= 0 {
			return nil, errCorrupt
		}
		b = b[k:]
		if p.end, k = binary.Varint(b); k <= 0 {
			return nil, errCorrupt
		}
		b = b[k:]
		if len(b) < 4 || int(binary.BigEndian.Uint32(b)) > len(b)-4 {
			return nil, errCorrupt
		}
		l := int(binary.BigEndian.Uint32(b))
		acc, err := c.acc.Decode(b[4 : 4+l : 4+l])
		if err != nil {
			return nil, fmt.Errorf("window: accumulator: %w", err)
		}
		p.acc = acc
		b = b[4+l:]
		if p.end <= p.start || (len(st.panes) > 0 && st.panes[len(st.panes)-1].end > p.start) {
			return nil, errCorrupt
		}
		st.panes = append(st.panes, p)
	}
	var ok int
	if st.firedThrough, ok = binary.Varint(b); ok <= 0 || ok != len(b) {
		return nil, errCorrupt
	}
	return st, nil
}

// sliceCodec stores a window's records for Process: a count, then each
// record length-prefixed in the element codec.
type sliceCodec[T any] struct{ elem topology.Codec[T] }

func (c sliceCodec[T]) CodecID() string {
	if id, ok := c.elem.(topology.IdentifiedCodec); ok {
		return "snapflow.slice/" + id.CodecID()
	}
	return fmt.Sprintf("snapflow.slice/%T", c.elem)
}

func (c sliceCodec[T]) Append(dst []byte, vs []T) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	for _, v := range vs {
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		if dst, err = c.elem.Append(dst, v); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst, nil
}

func (c sliceCodec[T]) Decode(b []byte) ([]T, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[k:]
	vs := make([]T, 0, n)
	for range n {
		if len(b) < 4 || int(binary.BigEndian.Uint32(b)) > len(b)-4 {
			return nil, errCorrupt
		}
		l := int(binary.BigEndian.Uint32(b))
		v, err := c.elem.Decode(b[4 : 4+l : 4+l])
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		b = b[4+l:]
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return vs, nil
}

// OpenWindows is the number of keys with open windows (windows that have
// not fired, or are kept for late records) in a window operator task's
// stored state: for tools and tests that look into checkpoints and
// savepoints.
func OpenWindows(st *messages.TaskState) int {
	n := 0
	for _, g := range st.GetKeyGroups() {
		for _, s := range g.GetStates() {
			if s.GetName() == stateName {
				n += len(s.GetEntries())
			}
		}
	}
	return n
}
