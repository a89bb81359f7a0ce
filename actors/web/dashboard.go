package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
)

// The dashboard's sources: one page, its style sheet and its script. The
// server inlines the last two into the page, so that the page is one
// request (which the token, given as ?token=, authorizes) and its Content
// Security Policy can allow exactly these two by hash and nothing else: no
// other script, style, frame or origin.
//
//go:embed dashboard/index.html dashboard/app.css dashboard/app.js
var assets embed.FS

// The tags of index.html that the inlined files replace.
const (
	cssLink   = `<link rel="stylesheet" href="app.css">`
	scriptTag = `<script src="app.js"></script>`
)

// builtPage is the page with its assets inlined, and its policy.
type builtPage struct {
	html []byte
	csp  string
}

var buildPage = sync.OnceValues(func() (p builtPage, err error) {
	read := func(name string) []byte {
		b, rerr := assets.ReadFile("dashboard/" + name)
		if rerr != nil && err == nil {
			err = fmt.Errorf("web: dashboard asset %s: %w", name, rerr)
		}
		return b
	}
	html, css, js := read("index.html"), read("app.css"), read("app.js")
	if err != nil {
		return p, err
	}
	for _, tag := range []string{cssLink, scriptTag} {
		if bytes.Count(html, []byte(tag)) != 1 {
			return p, fmt.Errorf("web: dashboard index.html must hold %s once", tag)
		}
	}
	html = bytes.Replace(html, []byte(cssLink), concat("<style>", css, "</style>"), 1)
	html = bytes.Replace(html, []byte(scriptTag), concat("<script>", js, "</script>"), 1)
	csp := fmt.Sprintf("default-src 'none'; script-src '%s'; style-src '%s'; connect-src 'self'; img-src 'self' data:; "+
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'", hash(js), hash(css))
	return builtPage{html: html, csp: csp}, nil
})

func concat(open string, body []byte, end string) []byte {
	out := make([]byte, 0, len(open)+len(body)+len(end))
	return append(append(append(out, open...), body...), end...)
}

// hash is a CSP source expression for an inline element's content.
func hash(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

// dashboard serves the page.
func (s *Server) dashboard(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", s.csp)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.page) // a failed write means the client left
}
