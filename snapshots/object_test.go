package snapshots_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func encodedState(t testing.TB) []byte {
	t.Helper()
	data, err := snapshots.EncodeObject(snapshots.KindTaskState, &messages.TaskState{
		Job: "job", TaskId: "sum#0", CheckpointId: 7, OperatorState: []byte("operator state"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestObjectRoundTrip(t *testing.T) {
	data := encodedState(t)
	var st messages.TaskState
	if err := snapshots.DecodeObject(data, snapshots.KindTaskState, &st); err != nil {
		t.Fatal(err)
	}
	if st.GetTaskId() != "sum#0" || st.GetCheckpointId() != 7 {
		t.Errorf("decoded %v", &st)
	}
	var empty messages.TaskState
	data, err := snapshots.EncodeObject(snapshots.KindTaskState, &empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshots.DecodeObject(data, snapshots.KindTaskState, &st); err != nil || !proto.Equal(&st, &empty) {
		t.Errorf("empty state: %v, %v", &st, err)
	}
	if _, err := snapshots.EncodeObject("", &empty); err == nil {
		t.Error("EncodeObject with an empty kind succeeded")
	}
}

// TestDecodeObjectFlippedBit flips every bit of an object in turn.
func TestDecodeObjectFlippedBit(t *testing.T) {
	data := encodedState(t)
	for i := range len(data) * 8 {
		bad := append([]byte(nil), data...)
		bad[i/8] ^= 1 << (i % 8)
		var st messages.TaskState
		if err := snapshots.DecodeObject(bad, snapshots.KindTaskState, &st); !errors.Is(err, snapshots.ErrCorrupt) {
			t.Errorf("bit %d of byte %d flipped: %v, want ErrCorrupt", i%8, i/8, err)
		}
	}
}

func TestDecodeObjectRejects(t *testing.T) {
	data := encodedState(t)
	withUnknown := append(append([]byte(nil), data...), 0x20, 0x01) // field 4, varint 1
	for name, tc := range map[string]struct {
		data []byte
		kind string
	}{
		"wrong kind":     {data, snapshots.KindManifest},
		"empty":          {nil, snapshots.KindTaskState},
		"truncated":      {data[:len(data)-1], snapshots.KindTaskState},
		"unknown fields": {withUnknown, snapshots.KindTaskState},
		"not protobuf":   {[]byte("hello, world"), snapshots.KindTaskState},
	} {
		var st messages.TaskState
		if err := snapshots.DecodeObject(tc.data, tc.kind, &st); !errors.Is(err, snapshots.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	f.Add(encodedState(f))
	f.Add([]byte{})
	f.Add([]byte("\x0a\x15snapflow.v1.TaskState"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st messages.TaskState
		err := snapshots.DecodeObject(data, snapshots.KindTaskState, &st)
		if err != nil && !errors.Is(err, snapshots.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		if err != nil {
			return
		}
		var env messages.StoredObject
		if proto.Unmarshal(data, &env) != nil || snapshots.Checksum(env.GetPayload()) != env.GetCrc32C() {
			t.Fatal("accepted an object whose checksum does not match")
		}
	})
}

// TestEnvelopeFieldNumbers guards the hand-written envelope parser against
// a change of messages.StoredObject.
func TestEnvelopeFieldNumbers(t *testing.T) {
	fields := (&messages.StoredObject{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[string]int{"kind": 1, "payload": 2, "crc32c": 3} {
		if f := fields.ByName(protoreflect.Name(name)); f == nil || int(f.Number()) != num {
			t.Errorf("StoredObject.%s is not field %d", name, num)
		}
	}
	if fields.Len() != 3 {
		t.Errorf("StoredObject has %d fields, the parser knows 3", fields.Len())
	}
}

// TestEncodeObjectIsTheEnvelope: the single-pass encoder writes exactly the
// bytes protobuf gives for the StoredObject envelope.
func TestEncodeObjectIsTheEnvelope(t *testing.T) {
	for _, st := range []*messages.TaskState{
		{},
		{TaskId: "sum#1", Operator: "sum", CheckpointId: 7, SourceOffset: []byte{1, 2, 3}, HasSourceOffset: true},
		{TaskId: "big", OperatorState: bytes.Repeat([]byte{9}, 1<<20)},
	} {
		got, err := snapshots.EncodeObject(snapshots.KindTaskState, st)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&messages.StoredObject{Kind: snapshots.KindTaskState, Payload: payload, Crc32C: snapshots.Checksum(payload)})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("snapshots.EncodeObject(%v) differs from the protobuf envelope", st.TaskId)
		}
	}
}
