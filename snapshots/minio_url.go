package snapshots

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// errURLCredentials is the answer to credentials in a store URL.
var errURLCredentials = errors.New("credentials may not appear in a store URL: set AWS_ACCESS_KEY_ID and " +
	"AWS_SECRET_ACCESS_KEY (or MINIO_ACCESS_KEY and MINIO_SECRET_KEY) in the environment")

// parseS3URL parses s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=B&region=R&create=B&ca=PATH.
// Its errors quote the URL only up to the query, which might hold a
// secret, and without user information.
func parseS3URL(raw string) (MinIOConfig, error) {
	var cfg MinIOConfig
	shown, _, _ := strings.Cut(raw, "?")
	bad := func(format string, args ...any) error {
		return fmt.Errorf("snapshots: store URL %q: %s", shown, fmt.Sprintf(format, args...))
	}
	authority, _, _ := strings.Cut(strings.TrimPrefix(shown[len("s3:"):], "//"), "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		shown = "s3://" + strings.TrimPrefix(shown[len("s3:"):], "//")[i+1:]
		return cfg, bad("%v", errURLCredentials)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return cfg, bad("%v", errors.Unwrap(err))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return cfg, bad("query: %v", err)
	}
	for name, vals := range q {
		if credentialParam(name) {
			return cfg, bad("parameter %q: %v", name, errURLCredentials)
		}
		if len(vals) > 1 {
			return cfg, bad("parameter %q given %d times", name, len(vals))
		}
	}
	cfg = MinIOConfig{
		Endpoint: q.Get("endpoint"),
		Bucket:   u.Host,
		Prefix:   strings.Trim(u.Path, "/"),
		Region:   q.Get("region"),
		CAFile:   q.Get("ca"),
		Secure:   true,
	}
	for name := range q {
		switch name {
		case "endpoint", "region", "ca":
		case "secure", "create":
			b, err := strconv.ParseBool(q.Get(name))
			if err != nil {
				return cfg, bad("%s=%q: want true or false", name, q.Get(name))
			}
			if name == "secure" {
				cfg.Secure = b
			} else {
				cfg.CreateBucket = b
			}
		default:
			return cfg, bad("unknown parameter %q (want endpoint, secure, region, create or ca)", name)
		}
	}
	switch {
	case u.Fragment != "":
		return cfg, bad("a fragment (#) is not allowed")
	case cfg.Bucket == "":
		return cfg, bad("no bucket: want s3://BUCKET/PREFIX?endpoint=HOST:PORT")
	case strings.Contains(cfg.Bucket, ":"):
		return cfg, bad("bucket %q has a port: the server goes in endpoint=HOST:PORT", cfg.Bucket)
	case cfg.Endpoint == "":
		return cfg, bad("endpoint= is required, e.g. s3://%s/PREFIX?endpoint=127.0.0.1:9000&secure=false", cfg.Bucket)
	}
	return cfg, nil
}

// credentialParam reports whether a query parameter looks like it holds
// credentials.
func credentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"access", "secret", "key", "password", "token", "credential", "user"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
