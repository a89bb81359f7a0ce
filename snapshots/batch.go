package snapshots

import "context"

// BatchDeleter is implemented by stores that delete many keys in one
// request (MinIO's multi-object delete). Retention uses it when present.
type BatchDeleter interface {
	// DeleteMany deletes keys; missing keys are not an error.
	DeleteMany(ctx context.Context, keys []string) error
}

// deleteMany deletes keys through s's BatchDeleter, or one by one.
func deleteMany(ctx context.Context, s Store, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if bd, ok := s.(BatchDeleter); ok {
		return bd.DeleteMany(ctx, keys)
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
