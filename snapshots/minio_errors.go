package snapshots

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
)

var (
	// ErrUnreachable is wrapped by errors about a store's server that
	// cannot be reached: a refused connection, a timeout, an unknown host.
	ErrUnreachable = errors.New("snapshots: store unreachable")
	// ErrAccessDenied is wrapped by errors about credentials that a store's
	// server rejects, or that lack the permission asked for.
	ErrAccessDenied = errors.New("snapshots: access denied")
	// ErrNoBucket is wrapped by errors about a bucket that does not exist.
	ErrNoBucket = errors.New("snapshots: no such bucket")
)

// credentialCodes are S3 error codes that mean the credentials are wrong
// or lack permission.
var credentialCodes = map[string]bool{
	minio.InvalidAccessKeyID:    true,
	minio.SignatureDoesNotMatch: true,
	minio.AccessDenied:          true,
	"InvalidToken":              true,
	"ExpiredToken":              true,
	"AllAccessDisabled":         true,
}

// transientCodes are S3 error codes worth retrying whatever their status.
var transientCodes = map[string]bool{
	"RequestTimeout":             true,
	"InternalError":              true,
	"SlowDown":                   true,
	"SlowDownRead":               true,
	"SlowDownWrite":              true,
	"Throttling":                 true,
	"ServiceUnavailable":         true,
	"XMinioServerNotInitialized": true,
}

// transient reports whether err may go away by itself: a 5xx, 408 or 429
// answer, a timeout, a refused or reset connection, an early EOF. A 4xx
// answer, a TLS failure or an unknown host is permanent.
func transient(err error) bool {
	if resp, ok := errorResponse(err); ok {
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout ||
			resp.StatusCode == http.StatusTooManyRequests || transientCodes[resp.Code]
	}
	if tlsFailure(err) {
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	return unreachable(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// transientWrite is transient, and also true for AccessDenied (but not
// for the codes of unknown keys or bad signatures). MinIO's single-drive
// backend answers a put with 403 AccessDenied when a concurrent delete
// removes the directory it is renaming into (its renameAll retries that
// race only once); with valid credentials, a retry succeeds. Real lack of
// permission costs MaxRetries retries before the same error.
func transientWrite(err error) bool {
	if resp, ok := errorResponse(err); ok && resp.Code == minio.AccessDenied {
		return true
	}
	return transient(err)
}

// unreachable reports whether err says the server could not be reached.
func unreachable(err error) bool {
	if _, ok := errorResponse(err); ok || tlsFailure(err) {
		return false
	}
	var ne net.Error
	var op *net.OpError
	return errors.As(err, &op) || (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) || minio.IsNetworkOrHostDown(err, false)
}

// tlsFailure reports whether err is about TLS: an untrusted or mismatched
// certificate, or HTTPS spoken to a plain-HTTP server or the reverse.
func tlsFailure(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		host     x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alertErr tls.AlertError
	)
	if errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alertErr) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "server gave HTTP response to HTTPS client") ||
		strings.Contains(msg, "HTTP request to an HTTPS server")
}

func errorResponse(err error) (minio.ErrorResponse, bool) {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp, true
	}
	var p *minio.ErrorResponse
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return resp, false
}

// fail wraps the error of operation op (e.g. "put a/b") with what it
// means for a person, and a sentinel for errors.Is. A done context wins,
// so that callers see ctx.Err(). Neither minio-go's errors nor these
// messages carry the secret key.
func (m *MinIO) fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("snapshots: minio %s: %s: %w", m, op, cerr)
	}
	where := fmt.Sprintf("snapshots: minio %s: %s", m, op)
	if resp, ok := errorResponse(err); ok {
		switch {
		case resp.Code == minio.NoSuchKey:
			return fmt.Errorf("%s: %w", where, ErrNotFound)
		case resp.Code == "InvalidRange" || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
			// A ranged read that starts at or past the object's end: the
			// object is shorter than the reader was told (see RangeReader).
			return fmt.Errorf("%s: the object is shorter: %w: %w", where, ErrCorrupt, err)
		case resp.Code == minio.NoSuchBucket && m.create:
			return fmt.Errorf("%s: bucket %q does not exist (the store creates it only when it is opened: "+
				"was it deleted since?): %w: %w", where, m.bucket, ErrNoBucket, err)
		case resp.Code == minio.NoSuchBucket:
			return fmt.Errorf("%s: bucket %q does not exist (create it, or add create=true to the store URL "+
				"or set MinIOConfig.CreateBucket): %w: %w", where, m.bucket, ErrNoBucket, err)
		case credentialCodes[resp.Code] || resp.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%s: %s: the credentials are wrong or lack permission on bucket %q "+
				"(check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or MINIO_ACCESS_KEY/MINIO_SECRET_KEY): %w: %w",
				where, resp.Code, m.bucket, ErrAccessDenied, err)
		case strings.Contains(resp.Message, "HTTP request to an HTTPS server"):
			return fmt.Errorf("%s: the server speaks HTTPS: drop secure=false: %w", where, err)
		default:
			return fmt.Errorf("%s: %s (HTTP %d): %w", where, resp.Code, resp.StatusCode, err)
		}
	}
	switch {
	case tlsFailure(err):
		return fmt.Errorf("%s: TLS with %s failed (a server without TLS needs secure=false; "+
			"one with its own CA needs ca=PATH or MinIOConfig.CAFile): %w", where, m.endpoint, err)
	case unreachable(err):
		return fmt.Errorf("%s: endpoint %s unreachable (is the server running, and are the host "+
			"and port right?): %w: %w", where, m.endpoint, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// ErrNotS3 is wrapped by errors about an endpoint that answers HTTP but
// not as an S3 server does: no S3 error code in its error answers, or
// objects that do not read back as written.
var ErrNotS3 = errors.New("snapshots: not an S3 server")
