package dataflow

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestValidateStoreNames checks that Validate refuses every job or operator
// name a snapshot store cannot hold in a key, naming the operator, and
// accepts the unusual names it can hold.
func TestValidateStoreNames(t *testing.T) {
	long := strings.Repeat("n", MaxNameLength+1)
	for _, tt := range []struct{ name, why string }{
		{".tmp-x", `must not start with ".tmp-", which the stores reserve for temporary files`},
		{".", `must not be "." or ".."`},
		{"..", `must not be "." or ".."`},
		{"a/b", `must not contain '#', '/' or '\'`},
		{`a\b`, `must not contain '#', '/' or '\'`},
		{"a#1", `must not contain '#', '/' or '\'`},
		{"a\x00b", "must not contain control characters"},
		{"a\nb", "must not contain control characters"},
		{"a\x7fb", "must not contain control characters"},
		{"a\u0085b", "must not contain control characters"},
		{"a\xffb", "is not valid UTF-8"},
		{long, fmt.Sprintf("is %d bytes long, more than %d", len(long), MaxNameLength)},
	} {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			g := New("job")
			Sink(Map(Sequence(g, "src", 1, 2), tt.name, id64), "sink", discard[int64])
			want := fmt.Sprintf("operator %q: the name %s", tt.name, tt.why)
			if got := problems(t, g); !slices.Equal(got, []string{want}) {
				t.Errorf("problems = %q, want %q", got, want)
			}
		})
	}
}

func TestValidateJobNames(t *testing.T) {
	long := strings.Repeat("j", MaxNameLength+1)
	for _, tt := range []struct{ name, why string }{
		{".tmp-job", `must not start with ".tmp-", which the stores reserve for temporary files`},
		{".", `must not be "." or ".."`},
		{"..", `must not be "." or ".."`},
		{"a/b", `must not contain '/' or '\'`},
		{`a\b`, `must not contain '/' or '\'`},
		{"a\tb", "must not contain control characters"},
		{"a\xc3", "is not valid UTF-8"},
		{long, fmt.Sprintf("is %d bytes long, more than %d", len(long), MaxNameLength)},
	} {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			g := New(tt.name)
			Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
			want := fmt.Sprintf("job name %q %s", tt.name, tt.why)
			if got := problems(t, g); !slices.Equal(got, []string{want}) {
				t.Errorf("problems = %q, want %q", got, want)
			}
		})
	}
}

// TestValidateAcceptsStorableNames checks names that every store can hold:
// dots, spaces, '#' in a job name, non-ASCII letters, the longest allowed.
func TestValidateAcceptsStorableNames(t *testing.T) {
	for _, job := range []string{"job", "job#1", "a.b", ".hidden", "..x", "tmp-x", "_tmp-x", "j ö 名", strings.Repeat("j", MaxNameLength)} {
		for _, op := range []string{"op", "a.b", "..x", ".tmpx", "x.tmp-", "double space", "名前", strings.Repeat("o", MaxNameLength)} {
			g := New(job)
			Sink(Map(Sequence(g, "src", 1, 2), op, id64), "sink", discard[int64])
			if err := g.Validate(); err != nil {
				t.Errorf("job %q, operator %q: Validate() = %v", job, op, err)
			}
		}
	}
}

// TestValidateMaxParallelismBound checks that a max parallelism that would
// not fit the key groups of a stored checkpoint is refused, naming the option.
func TestValidateMaxParallelismBound(t *testing.T) {
	for _, tt := range []struct {
		maxP int
		ok   bool
	}{
		{1, true},
		{MaxParallelismLimit, true},
		{MaxParallelismLimit + 1, false},
		{1 << 32, false},
		{0, false},
		{-1, false},
	} {
		g := New("job", MaxParallelism(tt.maxP))
		Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
		err := g.Validate()
		if tt.ok {
			if err != nil {
				t.Errorf("MaxParallelism(%d): Validate() = %v", tt.maxP, err)
			}
			continue
		}
		want := fmt.Sprintf("topology.MaxParallelism(%d): the max parallelism must be between 1 and %d", tt.maxP, MaxParallelismLimit)
		if got := problems(t, g); !slices.Equal(got, []string{want}) {
			t.Errorf("problems = %q, want %q", got, want)
		}
	}
}
