package snapshots

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxProbeBody bounds what checkS3 reads of an answer.
const maxProbeBody = 64 << 10

// checkS3 asks the endpoint, unsigned, for the bucket's location. Every S3
// server answers that with an S3 document: the location, or an error with
// an S3 error code (NoSuchBucket, AccessDenied...), and S3 servers tag
// their answers with a request id. checkS3 returns an error wrapping
// ErrNotS3 when the answer is none of these, and nil when it is, or when
// the probe itself fails (the caller's error then stands). op names the
// step of Check for the error.
func (m *MinIO) checkS3(ctx context.Context, op string) error {
	pctx, cancel := context.WithTimeout(ctx, checkAttemptTimeout)
	defer cancel()
	scheme := "http"
	if m.secure {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: m.endpoint, Path: "/" + m.bucket + "/", RawQuery: "location="}
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil
	}
	client := &http.Client{
		Transport:     m.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil || s3Answer(resp, body) {
		return nil
	}
	what := "without an S3 error"
	if resp.StatusCode < 300 {
		what = "without an S3 document"
	}
	return fmt.Errorf("snapshots: minio %s: %s: s3 endpoint %s answered HTTP %d %s (%s): "+
		"is it an S3/MinIO server?: %w", m, op, m.endpoint, resp.StatusCode, what, excerpt(body), ErrNotS3)
}

// s3Answer reports whether an answer comes from an S3 server: it carries
// an S3 request id or error code header, or its body is an S3 error with
// a code, or a bucket location.
func s3Answer(resp *http.Response, body []byte) bool {
	for _, h := range []string{"X-Amz-Request-Id", "X-Amz-Id-2", "X-Minio-Error-Code"} {
		if resp.Header.Get(h) != "" {
			return true
		}
	}
	var doc struct {
		XMLName xml.Name
		Code    string `xml:"Code"`
	}
	if xml.Unmarshal(body, &doc) != nil {
		return false
	}
	switch doc.XMLName.Local {
	case "Error":
		return doc.Code != ""
	case "LocationConstraint":
		return resp.StatusCode == http.StatusOK
	}
	return false
}

// excerpt describes the start of an answer's body for an error message.
func excerpt(body []byte) string {
	const limit = 60
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "empty body"
	}
	if len(s) > limit {
		return fmt.Sprintf("body %q...", s[:limit])
	}
	return fmt.Sprintf("body %q", s)
}
