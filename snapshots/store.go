package snapshots

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound is wrapped by errors about an object that does not exist.
	ErrNotFound = errors.New("snapshots: not found")
	// ErrCorrupt is wrapped by errors about an object that exists but does
	// not decode or verify: a bad envelope, a checksum or size mismatch, the
	// wrong kind, or contents that contradict where the object is stored.
	ErrCorrupt = errors.New("snapshots: corrupt object")
	// ErrInvalidKey is wrapped by errors about a key that no Store accepts.
	ErrInvalidKey = errors.New("snapshots: invalid key")
)

// Store is a flat key/value object store that holds snapshots.
//
// Keys are '/'-separated relative paths: not empty, no leading or trailing
// '/', no empty, "." or ".." segments, no backslash or NUL, and no segment
// starting with ".tmp-" (reserved for the temporary files of stores that
// need them). A key that breaks these rules is rejected with an error
// wrapping ErrInvalidKey.
//
// Implementations are safe for concurrent use. Every method that takes a
// context returns an error wrapping ctx.Err() once the context is done.
//
// A key must not also be a prefix directory of another key ("a" and "a/b"):
// a directory-backed store cannot hold both.
type Store interface {
	// Put stores data under key, replacing any previous object. It is
	// atomic: the object becomes visible only when it is complete, and a
	// failed Put leaves the previous object, or none, in place. When Put
	// returns nil the object is durable as far as the store can make it so.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the object stored under key, or an error wrapping
	// ErrNotFound when there is none. The caller owns the returned slice.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns every key that starts with prefix, as a plain string
	// prefix (not only at '/' boundaries), sorted ascending.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes the object under key. Deleting a missing key is not
	// an error.
	Delete(ctx context.Context, key string) error
	// Check verifies that the store is reachable and writable and returns
	// an error that says what is wrong otherwise.
	Check(ctx context.Context) error
	// String describes the store for humans, e.g. "dir:/var/x" or
	// "mem://". It never contains secrets.
	String() string
	// Close releases the store's resources.
	Close() error
}

// tmpPrefix starts the names of temporary files; keys may not use it.
const tmpPrefix = ".tmp-"

// validateKey reports whether key obeys the rules of Store.
func validateKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("snapshots: key %q %s: %w", key, why, ErrInvalidKey)
	}
	switch {
	case key == "":
		return bad("is empty")
	case strings.HasPrefix(key, "/"):
		return bad("is absolute")
	case strings.ContainsRune(key, '\\'):
		return bad("contains a backslash")
	case strings.ContainsRune(key, 0):
		return bad("contains a NUL byte")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return bad("has an empty segment")
		case seg == "." || seg == "..":
			return bad(`has a "." or ".." segment`)
		case strings.HasPrefix(seg, tmpPrefix):
			return bad("has a segment starting with the reserved " + tmpPrefix)
		}
	}
	return nil
}

// validatePrefix checks a List prefix: the part up to its last '/' must be a
// valid key, so that a listing never leaves the store.
func validatePrefix(prefix string) error {
	if strings.ContainsAny(prefix, "\\\x00") || strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("snapshots: list prefix %q: %w", prefix, ErrInvalidKey)
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := validateKey(prefix[:i]); err != nil {
			return fmt.Errorf("snapshots: list prefix %q: %w", prefix, err)
		}
	}
	return nil
}
