package snapshots

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/minio/minio-go/v7"
)

// Put uploads data as one object of known size, which S3 makes visible
// only once complete.
func (m *MinIO) Put(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	return m.put(ctx, "put "+key, m.object(key), data)
}

func (m *MinIO) put(ctx context.Context, op, object string, data []byte) error {
	return m.doWrite(ctx, op, func(ctx context.Context) error {
		_, err := m.client.PutObject(ctx, m.bucket, object, bytes.NewReader(data), int64(len(data)), putOptions())
		return err
	})
}

// putOptions are the options of every PutObject. Objects carry their own
// CRC-32C, verified on every read, and minio-go sends a trailing CRC-32C
// that the server checks when the payload is not signed: signing it with
// SHA-256 as well (the default over plain HTTP) would only cost
// throughput.
func putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true}
}

// Create uploads data as Put does, with If-None-Match: *, so that the
// server stores it only where no object is (S3 since 2024, MinIO since
// RELEASE.2024-05-07). A failed condition (412 PreconditionFailed) is
// ErrExists; a conflict with a concurrent conditional write (409) is
// retried, as is a lost answer, after which the object the retry finds
// may be the one this call created (see Creator).
func (m *MinIO) Create(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	return m.createObject(ctx, "create "+key, m.object(key), data)
}

// createObject is Create of object, for step op.
func (m *MinIO) createObject(ctx context.Context, op, object string, data []byte) error {
	err := m.retry(ctx, op, func(err error) bool {
		resp, ok := errorResponse(err)
		return (ok && resp.StatusCode == http.StatusConflict) || transientWrite(err)
	}, func(ctx context.Context) error {
		opts := putOptions()
		opts.SetMatchETagExcept("*")
		_, err := m.client.PutObject(ctx, m.bucket, object, bytes.NewReader(data), int64(len(data)), opts)
		return err
	})
	if resp, ok := errorResponse(err); ok && (resp.Code == "PreconditionFailed" || resp.StatusCode == http.StatusPreconditionFailed) {
		return fmt.Errorf("snapshots: minio %s: %s: %w", m, op, ErrExists)
	}
	return err
}

// Get downloads the object under key; a missing one gives ErrNotFound.
func (m *MinIO) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	return m.getObject(ctx, "get "+key, m.object(key), minio.GetObjectOptions{})
}

// GetRange implements RangeReader with a ranged GET.
func (m *MinIO) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("snapshots: get %s bytes %d..%d: %w", key, offset, offset+length, ErrCorrupt)
	}
	if length == 0 {
		return []byte{}, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(offset, offset+length-1); err != nil {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	data, err := m.getObject(ctx, fmt.Sprintf("get %s bytes %d..%d", key, offset, offset+length), m.object(key), opts)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != length {
		return nil, fmt.Errorf("snapshots: get %s bytes %d..%d: %d bytes came back: the object is shorter: %w", key, offset, offset+length, len(data), ErrCorrupt)
	}
	return data, nil
}

func (m *MinIO) getObject(ctx context.Context, op, object string, opts minio.GetObjectOptions) ([]byte, error) {
	var data []byte
	err := m.do(ctx, op, func(ctx context.Context) error {
		body, info, _, err := m.core.GetObject(ctx, m.bucket, object, opts)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if info.Size > 0 {
			buf.Grow(int(info.Size))
		}
		_, rerr := buf.ReadFrom(body)
		if err := errors.Join(rerr, body.Close()); err != nil {
			return err
		}
		data = buf.Bytes()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// List lists the objects under the store's prefix and prefix, recursively,
// and returns their keys sorted.
func (m *MinIO) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	var keys []string
	err := m.do(ctx, fmt.Sprintf("list %q", prefix), func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		keys = keys[:0]
		opts := minio.ListObjectsOptions{Prefix: m.object(prefix), Recursive: true}
		for obj := range m.client.ListObjectsIter(ctx, m.bucket, opts) {
			if obj.Err != nil {
				return obj.Err
			}
			if key, ok := m.key(obj.Key); ok {
				keys = append(keys, key)
			}
		}
		if len(keys) > 0 {
			return nil
		}
		// MinIO can list a bucket removed a moment before as empty: an
		// empty listing is confirmed, so that a deleted bucket is never
		// taken for a store without checkpoints.
		exists, err := m.client.BucketExists(ctx, m.bucket)
		if err == nil && !exists {
			err = minio.ErrorResponse{Code: minio.NoSuchBucket, StatusCode: http.StatusNotFound, BucketName: m.bucket, Message: "The specified bucket does not exist"}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return keys, nil
}

// Delete removes the object under key; S3 deletes are idempotent.
func (m *MinIO) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	return m.remove(ctx, "delete "+key, m.object(key))
}

func (m *MinIO) remove(ctx context.Context, op, object string) error {
	return m.doWrite(ctx, op, func(ctx context.Context) error {
		return m.client.RemoveObject(ctx, m.bucket, object, minio.RemoveObjectOptions{})
	})
}

// checkAttemptTimeout bounds each attempt of Check's first request.
const checkAttemptTimeout = 5 * time.Second

// Check verifies that the server is reachable, the credentials valid and
// the bucket present, creating it when so configured, then writes, reads
// back and deletes a probe object under the prefix. An endpoint that
// answers HTTP but not as S3 does (an error answer without an S3 error
// code, or a probe that does not read back) gives an error wrapping
// ErrNotS3, not a missing bucket or wrong credentials.
func (m *MinIO) Check(ctx context.Context) error {
	var exists bool
	err := m.do(ctx, "check bucket", func(ctx context.Context) error {
		// An endpoint that drops packets would otherwise hold each attempt
		// for the transport's 30s dial timeout.
		actx, cancel := context.WithTimeout(ctx, checkAttemptTimeout)
		defer cancel()
		var err error
		exists, err = m.client.BucketExists(actx, m.bucket)
		return err
	})
	if err == nil && !exists {
		// minio-go reports any 404 as a missing bucket, S3 or not.
		err = m.checkS3(ctx, "check bucket")
	}
	if err != nil {
		return m.explainCheck(ctx, "check bucket", err)
	}
	if !exists {
		if err := m.makeBucket(ctx); err != nil {
			return m.explainCheck(ctx, "create bucket", err)
		}
	}
	probe := m.object(tmpPrefix + "check-" + rand.Text())
	want := []byte("snapflow")
	if err := m.put(ctx, "check write", probe, want); err != nil {
		return m.explainCheck(ctx, "check write", err)
	}
	got, rerr := m.getObject(ctx, "check read", probe, minio.GetObjectOptions{})
	switch {
	case rerr != nil:
		rerr = m.explainCheck(ctx, "check read", rerr)
	case !bytes.Equal(got, want):
		rerr = fmt.Errorf("snapshots: minio %s: check read: s3 endpoint %s returned %d bytes (%s) for the "+
			"object just written, not what was written: is it an S3/MinIO server?: %w", m, m.endpoint, len(got), excerpt(got), ErrNotS3)
	}
	if rerr == nil {
		rerr = m.checkConditional(ctx)
	}
	return errors.Join(rerr, m.remove(ctx, "check delete", probe))
}

// explainCheck returns the error of Check's step op, or one wrapping
// ErrNotS3 when the server answered but is not S3: minio-go makes up an S3
// error code (NoSuchBucket for a 404, AccessDenied for a 403) for answers
// that carry none.
func (m *MinIO) explainCheck(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrNotS3) || ctx.Err() != nil || unreachable(err) || tlsFailure(err) {
		return err
	}
	if nerr := m.checkS3(ctx, op); nerr != nil {
		return nerr
	}
	return err
}

// makeBucket creates the bucket when configured to, and otherwise
// reports it missing.
func (m *MinIO) makeBucket(ctx context.Context) error {
	if !m.create {
		return m.fail(ctx, "check bucket", minio.ErrorResponse{Code: minio.NoSuchBucket, StatusCode: 404,
			Message: "The specified bucket does not exist", BucketName: m.bucket})
	}
	return m.do(ctx, "create bucket", func(ctx context.Context) error {
		err := m.client.MakeBucket(ctx, m.bucket, minio.MakeBucketOptions{Region: m.region})
		if resp, ok := errorResponse(err); ok && resp.Code == minio.BucketAlreadyOwnedByYou {
			return nil
		}
		return err
	})
}

// DeleteMany deletes keys with multi-object delete requests (up to 1000
// keys each), retrying transient failures; it implements BatchDeleter.
func (m *MinIO) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := validateKey(k); err != nil {
			return err
		}
	}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), 1000)]
		keys = keys[len(chunk):]
		err := m.doWrite(ctx, fmt.Sprintf("delete %d objects", len(chunk)), func(ctx context.Context) error {
			objects := make(chan minio.ObjectInfo, len(chunk))
			for _, k := range chunk {
				objects <- minio.ObjectInfo{Key: m.object(k)}
			}
			close(objects)
			var first error
			for e := range m.client.RemoveObjects(ctx, m.bucket, objects, minio.RemoveObjectsOptions{}) {
				if first == nil && e.Err != nil && minio.ToErrorResponse(e.Err).Code != "NoSuchKey" {
					first = e.Err
				}
			}
			return first
		})
		if err != nil {
			return err
		}
	}
	return nil
}
