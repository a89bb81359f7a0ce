package snapshots

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
)

// ErrNoConditionalWrites is wrapped by the error of opening an S3 store
// whose endpoint does not honour If-None-Match: * (create only if
// absent): the job's lease and manifests rely on it, and where it is
// ignored two holders can both win a lease generation and both complete
// the same checkpoint. MinIO honours it since RELEASE.2024-05-07, AWS S3
// since August 2024.
var ErrNoConditionalWrites = errors.New("snapshots: the store does not honour conditional writes (If-None-Match: *)")

// checkConditional creates a probe object only if absent twice: the first
// must succeed, the second must fail with 412 PreconditionFailed. Otherwise
// it returns an error wrapping ErrNoConditionalWrites that names the
// endpoint. It deletes the probe.
func (m *MinIO) checkConditional(ctx context.Context) error {
	probe := m.object(tmpPrefix + "conditional-" + rand.Text())
	first := m.createObject(ctx, "check conditional write", probe, []byte("first"))
	if first != nil && !errors.Is(first, ErrExists) { // ErrExists: a retry found the probe's first write
		if resp, ok := errorResponse(first); ok && (resp.StatusCode == http.StatusNotImplemented || resp.Code == "NotImplemented") {
			return m.noConditional(fmt.Sprintf("it refused If-None-Match: * (%s)", resp.Code))
		}
		return m.explainCheck(ctx, "check conditional write", first)
	}
	second := m.createObject(ctx, "check conditional write", probe, []byte("second"))
	var err error
	switch {
	case second == nil:
		err = m.noConditional("a second create-only-if-absent (If-None-Match: *) of the same object succeeded, where it must fail with 412 PreconditionFailed")
	case !errors.Is(second, ErrExists):
		err = m.explainCheck(ctx, "check conditional write", second)
	}
	return errors.Join(err, m.remove(ctx, "check conditional delete", probe))
}

// noConditional returns the error wrapping ErrNoConditionalWrites.
func (m *MinIO) noConditional(why string) error {
	return fmt.Errorf("snapshots: minio %s: s3 endpoint %s does not honour conditional writes: %s; snapflow creates its lease "+
		"and manifests only if absent, so that two holders of a job never both win: use MinIO RELEASE.2024-05-07 or later, "+
		"AWS S3, or another server that honours If-None-Match: * (see docs/stores.md): %w", m, m.endpoint, why, ErrNoConditionalWrites)
}
