package snapshots

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Kinds of the objects that Checkpoints stores.
const (
	KindTaskState = "snapflow.v1.TaskState"
	KindManifest  = "snapflow.v1.Manifest"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the Castagnoli CRC-32 (CRC-32C) of data, the checksum
// used by envelopes and state handles.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

var deterministic = proto.MarshalOptions{Deterministic: true}

// EncodeObject marshals m and wraps it in a messages.StoredObject envelope
// that names its kind and carries the CRC-32C of the payload. The payload is
// marshalled straight into the envelope, so a large state is copied once.
func EncodeObject(kind string, m proto.Message) ([]byte, error) {
	if kind == "" {
		return nil, errors.New("snapshots: encode: empty kind")
	}
	size := deterministic.Size(m)
	buf := make([]byte, 0, size+len(kind)+2*protowire.SizeVarint(uint64(size))+16)
	buf = protowire.AppendTag(buf, fieldKind, protowire.BytesType)
	buf = protowire.AppendString(buf, kind)
	if size > 0 { // proto3 leaves an empty field out
		buf = protowire.AppendTag(buf, fieldPayload, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(size))
	}
	start := len(buf)
	buf, err := deterministic.MarshalAppend(buf, m)
	if err != nil {
		return nil, fmt.Errorf("snapshots: encode %s: %w", kind, err)
	}
	if len(buf)-start != size {
		return nil, fmt.Errorf("snapshots: encode %s: the message changed while it was marshalled", kind)
	}
	if crc := Checksum(buf[start:]); crc != 0 { // proto3 leaves a zero field out
		buf = protowire.AppendTag(buf, fieldCRC, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(crc))
	}
	return buf, nil
}

// DecodeObject unwraps an envelope written by EncodeObject and unmarshals its
// payload into into. It returns an error wrapping ErrCorrupt when the
// envelope does not parse strictly (unknown or repeated fields, a checksum
// wider than 32 bits), when its kind is not kind, when the checksum does not
// match the payload, or when the payload does not unmarshal.
func DecodeObject(data []byte, kind string, into proto.Message) error {
	return decodeObject(data, kind, into, false)
}

// decodeObject is DecodeObject; verified says that data's checksum as a
// whole was already checked against a handle's, which makes the envelope's
// checksum of the payload, a second pass over the same bytes, redundant.
func decodeObject(data []byte, kind string, into proto.Message, verified bool) error {
	env, err := parseEnvelope(data)
	if err != nil {
		return fmt.Errorf("snapshots: decode envelope: %w: %w", ErrCorrupt, err)
	}
	if env.kind != kind {
		return fmt.Errorf("snapshots: decode: kind %q, want %q: %w", env.kind, kind, ErrCorrupt)
	}
	if !verified {
		if got := Checksum(env.payload); got != env.crc {
			return fmt.Errorf("snapshots: decode %s: crc32c %08x, want %08x: %w", kind, got, env.crc, ErrCorrupt)
		}
	}
	if err := proto.Unmarshal(env.payload, into); err != nil {
		return fmt.Errorf("snapshots: decode %s payload: %w: %w", kind, ErrCorrupt, err)
	}
	return nil
}

// envelope is a parsed messages.StoredObject; payload aliases the input.
type envelope struct {
	kind    string
	payload []byte
	crc     uint32
}

// Field numbers of messages.StoredObject.
const (
	fieldKind    = 1
	fieldPayload = 2
	fieldCRC     = 3
)

// parseEnvelope parses a StoredObject more strictly than proto.Unmarshal
// would, so that a flipped bit cannot go unnoticed: every field at most
// once, no unknown fields, and a checksum that fits in 32 bits (a uint32
// field would silently drop the higher bits).
func parseEnvelope(data []byte) (envelope, error) {
	var (
		env  envelope
		seen [fieldCRC + 1]bool
	)
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return env, protowire.ParseError(n)
		}
		data = data[n:]
		if num < fieldKind || num > fieldCRC {
			return env, fmt.Errorf("unknown field %d", num)
		}
		if seen[num] {
			return env, fmt.Errorf("field %d repeated", num)
		}
		seen[num] = true
		want := protowire.BytesType
		if num == fieldCRC {
			want = protowire.VarintType
		}
		if typ != want {
			return env, fmt.Errorf("field %d has wire type %d, want %d", num, typ, want)
		}
		if num == fieldCRC {
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return env, protowire.ParseError(n)
			}
			if v > math.MaxUint32 {
				return env, fmt.Errorf("checksum %#x wider than 32 bits", v)
			}
			env.crc, data = uint32(v), data[n:]
			continue
		}
		b, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return env, protowire.ParseError(n)
		}
		data = data[n:]
		if num == fieldKind {
			if !utf8.Valid(b) {
				return env, errors.New("kind is not valid UTF-8")
			}
			env.kind = string(b)
		} else {
			env.payload = b
		}
	}
	return env, nil
}
