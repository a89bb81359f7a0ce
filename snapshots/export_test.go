package snapshots

// SetMinIORetryHook makes m call hook before each retry, with the
// operation, the attempt that failed (from 0) and its error.
func SetMinIORetryHook(m *MinIO, hook func(op string, attempt int, err error)) { m.retryHook = hook }

// NewMinIOUnchecked builds a MinIO store without Check, so that tests can
// hold a store whose server rejects it.
func NewMinIOUnchecked(cfg MinIOConfig) (*MinIO, error) { return newMinIO(cfg) }
