package snapshots

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// DefaultDir is the directory, relative to the working directory, that Open
// uses for an empty URL.
const DefaultDir = "snapflow-data"

// Open opens the store that url names and checks it:
//
//	""                  a Dir at DefaultDir
//	/var/x, ./x, x      a Dir at that path
//	file:///var/x       a Dir at /var/x (an absolute path; host empty or localhost)
//	mem://              a new, empty Mem
//	mem://name          the Mem called name, shared within the process
//	s3://BUCKET/PREFIX?endpoint=HOST:PORT[&secure=false][&region=R][&create=true][&ca=PATH]
//	                    a MinIO (or S3) store; secure defaults to true,
//	                    create=true makes a missing bucket, ca= trusts a
//	                    PEM CA file
//
// An s3 store takes its credentials from the environment only
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or MINIO_ACCESS_KEY/
// MINIO_SECRET_KEY); a URL that holds credentials is rejected.
//
// Any other scheme is rejected with an error that lists these forms.
func Open(ctx context.Context, url string) (Store, error) {
	s, err := open(url)
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func open(raw string) (Store, error) {
	scheme, rest, isURL := splitScheme(raw)
	if !isURL {
		if raw == "" {
			raw = DefaultDir
		}
		return NewDir(raw)
	}
	unsupported := fmt.Errorf("snapshots: unsupported store URL %q "+
		"(want a path, file://PATH, mem:// or s3://BUCKET/PREFIX?endpoint=HOST:PORT)", raw)
	switch {
	case scheme == "s3" && strings.HasPrefix(rest, "//"):
		cfg, err := parseS3URL(raw)
		if err != nil {
			return nil, err
		}
		return newMinIO(cfg)
	case scheme == "mem" && strings.HasPrefix(rest, "//"):
		name := rest[2:]
		if strings.ContainsAny(name, "/?#") {
			return nil, fmt.Errorf("snapshots: store URL %q: a mem:// name may not contain '/', '?' or '#'", raw)
		}
		if name == "" {
			return NewMem(), nil
		}
		return namedMem(name), nil
	case scheme == "file" && strings.HasPrefix(rest, "//"):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("snapshots: store URL %q: %w", raw, err)
		}
		if (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("snapshots: store URL %q: want file:///absolute/path", raw)
		}
		return NewDir(u.Path)
	default:
		return nil, unsupported
	}
}

// splitScheme splits "scheme:rest" when raw starts with a URL scheme of two
// or more characters (a one-letter one would be a Windows drive).
func splitScheme(raw string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(raw, ":")
	if !ok || len(scheme) < 2 {
		return "", "", false
	}
	for i, r := range scheme {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return "", "", false
		}
	}
	return strings.ToLower(scheme), rest, true
}
