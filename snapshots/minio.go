package snapshots

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// MinIOConfig configures a MinIO store (any S3-compatible server).
type MinIOConfig struct {
	// Endpoint is the server's HOST:PORT (or HOST), without a scheme.
	Endpoint string
	// Bucket holds the objects.
	Bucket string
	// Prefix is prepended to every key, followed by '/'. Leading and
	// trailing slashes are ignored; it may be empty.
	Prefix string
	// Region is the bucket's region. When empty, the client asks the
	// server once per bucket (MinIO answers us-east-1).
	Region string
	// Secure selects HTTPS.
	Secure bool
	// CAFile is a PEM file of extra certificate authorities to trust, in
	// addition to the system's, for HTTPS to a server with its own CA.
	CAFile string
	// AccessKey and SecretKey are static credentials. When both are empty
	// the store takes its credentials from the environment, through
	// minio-go's credential chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
	// (and AWS_SESSION_TOKEN), then MINIO_ROOT_USER/MINIO_ROOT_PASSWORD or
	// MINIO_ACCESS_KEY/MINIO_SECRET_KEY. IAM and other network-based
	// providers are deliberately not in the chain.
	AccessKey, SecretKey string
	// CreateBucket creates the bucket when it does not exist.
	CreateBucket bool
	// MaxRetries bounds the retries of an operation that failed with a
	// transient error (a 5xx answer, a timeout, a refused or reset
	// connection, an early EOF). 0 means DefaultMinIORetries; a negative
	// value disables retries.
	MaxRetries int
	// RetryBackoff is the wait before the first retry; it doubles for each
	// further retry up to MaxMinIOBackoff (a larger RetryBackoff is kept
	// as is), and each wait is jittered between half and all of it. 0
	// means DefaultMinIOBackoff.
	RetryBackoff time.Duration
}

// Retry defaults of MinIOConfig.
const (
	DefaultMinIORetries = 4
	DefaultMinIOBackoff = 50 * time.Millisecond
	MaxMinIOBackoff     = time.Second
)

// MinIO is a Store in a bucket of a MinIO or other S3-compatible server,
// through minio-go. The key "a/b" is the object "<prefix>/a/b".
//
// Put is a single PutObject with a known size (a multipart upload for
// large objects), which S3 makes visible only once complete, so Put is
// atomic. Transient failures (5xx, 408, 429, timeouts, refused or reset
// connections, early EOFs) are retried with capped exponential backoff and
// jitter, within the context; permanent ones (4xx) are returned at once.
// One exception: puts and deletes also retry AccessDenied, because a
// single-drive MinIO answers 403 AccessDenied when a put races with a
// delete that empties the same directory. Invalid keys and bad signatures
// are never retried.
//
// minio-go makes up to 10 attempts per request by itself, with its own
// backoff. The store sets its MaxRetries option to 1 (a single attempt)
// so that the store's bounded retry loop is the only one: otherwise the
// two would multiply, to 10 × 5 attempts per Put with the defaults. The
// price is that minio-go no longer follows a "wrong region" answer by
// retrying, so a bucket outside the endpoint's default region needs Region
// set (MinIO's is us-east-1, which minio-go asks for once per bucket).
type MinIO struct {
	client   *minio.Client
	core     minio.Core
	tr       *http.Transport
	endpoint string
	bucket   string
	prefix   string // no leading or trailing '/'
	region   string
	caFile   string
	secure   bool
	create   bool
	retries  int
	backoff  time.Duration
	// retryHook, when set (by tests), is called before each retry.
	retryHook func(op string, attempt int, err error)
}

var _ Store = (*MinIO)(nil)

// NewMinIO returns the MinIO store that cfg describes, once Check has
// found it reachable, the credentials valid, the bucket present (or made,
// with CreateBucket) and writable. Errors never contain the secret key.
func NewMinIO(ctx context.Context, cfg MinIOConfig) (*MinIO, error) {
	m, err := newMinIO(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.Check(ctx); err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return m, nil
}

// newMinIO validates cfg and builds the client without any I/O.
func newMinIO(cfg MinIOConfig) (*MinIO, error) {
	m := &MinIO{
		endpoint: cfg.Endpoint,
		bucket:   cfg.Bucket,
		prefix:   strings.Trim(cfg.Prefix, "/"),
		region:   cfg.Region,
		caFile:   cfg.CAFile,
		secure:   cfg.Secure,
		create:   cfg.CreateBucket,
		retries:  cfg.MaxRetries,
		backoff:  cfg.RetryBackoff,
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("snapshots: minio %s: %w", m, err)
	}
	switch {
	case m.retries == 0:
		m.retries = DefaultMinIORetries
	case m.retries < 0:
		m.retries = 0
	}
	if m.backoff <= 0 {
		m.backoff = DefaultMinIOBackoff
	}
	tr, err := minioTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("snapshots: minio %s: %w", m, err)
	}
	creds, err := minioCredentials(cfg)
	if err != nil {
		return nil, fmt.Errorf("snapshots: minio %s: %w", m, err)
	}
	m.tr = tr
	m.client, err = minio.New(m.endpoint, &minio.Options{
		Creds:      creds,
		Secure:     m.secure,
		Transport:  m.tr,
		Region:     m.region,
		MaxRetries: 1, // one attempt: the store retries (see MinIO)
	})
	if err != nil {
		return nil, fmt.Errorf("snapshots: minio %s: client: %w", m, err)
	}
	m.core = minio.Core{Client: m.client}
	return m, nil
}

func (m *MinIO) validate() error {
	switch {
	case m.endpoint == "":
		return errors.New("no endpoint: want HOST:PORT, e.g. 127.0.0.1:9000")
	case strings.Contains(m.endpoint, "://"):
		return fmt.Errorf("endpoint %q: want HOST:PORT without a scheme (use secure for https)", m.endpoint)
	case strings.ContainsAny(m.endpoint, "/?#@"):
		return fmt.Errorf("endpoint %q: want HOST:PORT without a path", m.endpoint)
	}
	if err := s3utils.CheckValidBucketNameStrict(m.bucket); err != nil {
		return fmt.Errorf("bucket %q: %w", m.bucket, err)
	}
	if m.prefix != "" {
		if err := validateKey(m.prefix); err != nil {
			return fmt.Errorf("prefix: %w", err)
		}
	}
	return nil
}

// minioCredentials returns static credentials or the environment chain,
// and fails when the chain finds none.
func minioCredentials(cfg MinIOConfig) (*credentials.Credentials, error) {
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return nil, errors.New("static credentials need both an access key and a secret key")
		}
		return credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), nil
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}})
	v, err := creds.Get()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if v.SignerType.IsAnonymous() {
		return nil, errors.New("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
			"(or MINIO_ACCESS_KEY and MINIO_SECRET_KEY) in the environment")
	}
	return creds, nil
}

// minioTransport returns minio-go's default transport, trusting CAFile.
func minioTransport(cfg MinIOConfig) (*http.Transport, error) {
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	if cfg.CAFile == "" {
		return tr, nil
	}
	if !cfg.Secure {
		return nil, fmt.Errorf("CA file %s given for plain HTTP: a CA needs secure=true", cfg.CAFile)
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate found", cfg.CAFile)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}

// String returns "s3://BUCKET/PREFIX?endpoint=HOST:PORT", with
// "&secure=false" for plain HTTP, "&region=R" and "&ca=PATH" when set. It
// is a URL that Open accepts, and never holds credentials.
func (m *MinIO) String() string {
	var b strings.Builder
	b.WriteString("s3://" + m.bucket)
	if m.prefix != "" {
		b.WriteString("/" + m.prefix)
	}
	b.WriteString("?endpoint=" + m.endpoint)
	if !m.secure {
		b.WriteString("&secure=false")
	}
	if m.region != "" {
		b.WriteString("&region=" + queryValue.Replace(m.region))
	}
	if m.caFile != "" {
		b.WriteString("&ca=" + queryValue.Replace(m.caFile))
	}
	return b.String()
}

// queryValue escapes the characters that would end or change a value in
// the query of a URL, and leaves paths readable.
var queryValue = strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "%20", ";", "%3B")

// Close releases idle connections. It may be called more than once.
func (m *MinIO) Close() error {
	m.tr.CloseIdleConnections()
	return nil
}

// object returns the object name of key.
func (m *MinIO) object(key string) string {
	if m.prefix == "" {
		return key
	}
	return m.prefix + "/" + key
}

// key returns the key of an object name, and false for objects outside
// the prefix or whose names are not valid keys (written by other tools,
// or Check's probes).
func (m *MinIO) key(object string) (string, bool) {
	key := object
	if m.prefix != "" {
		var ok bool
		if key, ok = strings.CutPrefix(object, m.prefix+"/"); !ok {
			return "", false
		}
	}
	return key, validateKey(key) == nil
}
