package dataflow

import (
	"hash/fnv"
	"math"
	"strings"
	"testing"
)

type userID string
type shard uint8

func keyRoundTrip[K Key](t *testing.T, ks ...K) {
	t.Helper()
	c := newKeyCodec[K]()
	for _, k := range ks {
		b := c.append([]byte("pre"), k)
		if string(b[:3]) != "pre" {
			t.Fatalf("append(%v) lost the bytes before it", k)
		}
		got, err := c.decode(b[3:])
		if err != nil {
			t.Fatalf("decode of %T %v: %v", k, k, err)
		}
		if got != k {
			t.Errorf("%T key %v round-trips to %v", k, k, got)
		}
		if h := c.hash(k); h != c.hash(got) {
			t.Errorf("hash of %v changes after a round trip", k)
		}
	}
}

func TestKeyCodecRoundTrip(t *testing.T) {
	keyRoundTrip(t, int8(math.MinInt8), -1, 0, 1, math.MaxInt8)
	keyRoundTrip(t, int16(math.MinInt16), -1, 0, 1, math.MaxInt16)
	keyRoundTrip(t, int32(math.MinInt32), -1, 0, 1, math.MaxInt32)
	keyRoundTrip(t, int64(math.MinInt64), -1, 0, 1, math.MaxInt64)
	keyRoundTrip(t, math.MinInt, -1, 0, 1, math.MaxInt)
	keyRoundTrip(t, uint8(0), 1, math.MaxUint8)
	keyRoundTrip(t, uint16(0), 1, math.MaxUint16)
	keyRoundTrip(t, uint32(0), 1, math.MaxUint32)
	keyRoundTrip(t, uint64(0), 1, math.MaxUint64)
	keyRoundTrip(t, uint(0), 1, math.MaxUint)
	keyRoundTrip(t, shard(0), 200)
	keyRoundTrip(t, "", "a", "héllo, 世界", strings.Repeat("k", 300), "\x00\xff")
	keyRoundTrip(t, userID(""), userID("u-1"))
}

// TestKeyCodecWidth checks that integer keys are stored sign-extended in 8
// bytes, so a key's bytes and hash do not depend on its width or platform.
func TestKeyCodecWidth(t *testing.T) {
	want := string(newKeyCodec[int64]().append(nil, -5))
	if want != "\xff\xff\xff\xff\xff\xff\xff\xfb" {
		t.Fatalf("int64 -5 encodes to %x", want)
	}
	for name, got := range map[string]string{
		"int8":  string(newKeyCodec[int8]().append(nil, -5)),
		"int16": string(newKeyCodec[int16]().append(nil, -5)),
		"int32": string(newKeyCodec[int32]().append(nil, -5)),
		"int":   string(newKeyCodec[int]().append(nil, -5)),
	} {
		if got != want {
			t.Errorf("%s -5 encodes to %x, want %x", name, got, want)
		}
	}
	h := newKeyCodec[int64]().hash(-5)
	if newKeyCodec[int8]().hash(-5) != h || newKeyCodec[int32]().hash(-5) != h {
		t.Error("the hash of -5 depends on the key's width")
	}
	if newKeyCodec[uint8]().hash(200) != newKeyCodec[uint64]().hash(200) {
		t.Error("the hash of 200 depends on the key's width")
	}
	if newKeyCodec[userID]().hash("x") != HashString("x") {
		t.Error("a named string type hashes differently from string")
	}
}

func TestKeyCodecDecodeErrors(t *testing.T) {
	for _, n := range []int{0, 1, 4, 7, 9} {
		if _, err := newKeyCodec[int32]().decode(make([]byte, n)); err == nil ||
			!strings.Contains(err.Error(), "want 8") {
			t.Errorf("decode of a %d-byte int32 key: %v", n, err)
		}
	}
}

// TestHashFixed pins the key hashes. They place keys in key groups, and key
// groups in checkpoints: a new hash would restore old checkpoints' keys into
// the wrong tasks.
func TestHashFixed(t *testing.T) {
	for _, tt := range []struct {
		in   uint64
		want uint64
	}{
		{0, 0},
		{1, 0xb456bcfc34c2cb2c},
		{2, 0x3abf2a20650683e7},
		{42, 0x810879608e4259cc},
		{1 << 63, 0x8f780810af31a493},
		{math.MaxUint64, 0x64b5720b4b825f21},
	} {
		if got := HashUint64(tt.in); got != tt.want {
			t.Errorf("HashUint64(%d) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in   string
		want uint64
	}{
		{"", 0xefd01f60ba992926},
		{"a", 0x82a2a958a9bece5b},
		{"alice", 0x3507d047a67c08f4},
		{"snapflow", 0xfad7b11db74b12d7},
		{"héllo", 0xc185412747a0264d},
	} {
		if got := HashString(tt.in); got != tt.want {
			t.Errorf("HashString(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
		// HashString is FNV-1a followed by the finaliser.
		f := fnv.New64a()
		f.Write([]byte(tt.in))
		if got := HashUint64(f.Sum64()); got != tt.want {
			t.Errorf("HashUint64(fnv1a(%q)) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		key  int
		hash uint64
		kg   int // of 128
	}{
		{0, 0, 0}, {1, 0xb456bcfc34c2cb2c, 44}, {-1, 0x64b5720b4b825f21, 33}, {42, 0x810879608e4259cc, 76}, {-42, 0x29ab61644f2784d4, 84},
	} {
		h := newKeyCodec[int]().hash(tt.key)
		if h != tt.hash || int(h%DefaultMaxParallelism) != tt.kg {
			t.Errorf("int key %d hashes to %#x (key group %d), want %#x (%d)", tt.key, h, h%DefaultMaxParallelism, tt.hash, tt.kg)
		}
	}
}

// TestKeyByHash checks that a user hash decides the key group, both for
// routing and for the state's key groups.
func TestKeyByHash(t *testing.T) {
	g := New("job", MaxParallelism(4))
	k := KeyByHash(Sequence(g, "src", 1, 2), id64, func(k int64) uint64 { return uint64(k) })
	kg := k.parts[0].keyGroup.(keyGrouper[int64]).of
	for v, want := range map[int64]int{0: 0, 1: 1, 5: 1, 7: 3, -1: 3} {
		if got := kg(v); got != want {
			t.Errorf("key group of %d = %d, want %d", v, got, want)
		}
	}
	if k.codec.hash(7) != 7 {
		t.Error("the state's key codec does not use the user's hash")
	}
}
