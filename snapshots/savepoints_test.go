package snapshots_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func TestValidateSavepointName(t *testing.T) {
	for _, name := range []string{"v1", "before-upgrade", "2026-03-01T10:00:00Z", "with space", "über", "_manifest",
		"a.b", "...", ".hidden", strings.Repeat("x", snapshots.MaxSavepointNameLength), strings.Repeat("é", 64)} {
		if err := snapshots.ValidateSavepointName(name); err != nil {
			t.Errorf("ValidateSavepointName(%q) = %v, want nil", name, err)
		}
	}
	for _, tc := range []struct{ name, why string }{
		{"", "is empty"},
		{"a/b", "'/'"},
		{"/", "'/'"},
		{`a\b`, `'\'`},
		{"a\x00b", "control character"},
		{"a\nb", "control character"},
		{"a\x7fb", "control character"},
		{"a\u0085b", "control character"},
		{"\xff", "not valid UTF-8"},
		{".", `"." or ".."`},
		{"..", `"." or ".."`},
		{".tmp-x", ".tmp-"},
		{strings.Repeat("x", snapshots.MaxSavepointNameLength+1), "129 bytes long, more than 128"},
		{strings.Repeat("é", 65), "130 bytes long"},
	} {
		err := snapshots.ValidateSavepointName(tc.name)
		if !errors.Is(err, snapshots.ErrInvalidSavepointName) {
			t.Errorf("ValidateSavepointName(%q) = %v, want ErrInvalidSavepointName", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) || !strings.HasPrefix(err.Error(), "snapshots: savepoint name ") {
			t.Errorf("ValidateSavepointName(%q) = %q, want it to say %q", tc.name, err, tc.why)
		}
		if tc.name != "" && utf8Printable(tc.name) && !strings.Contains(err.Error(), tc.name) {
			t.Errorf("ValidateSavepointName(%q) = %q does not name it", tc.name, err)
		}
	}
}

func utf8Printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == '\\' || r == 0xfffd })
}
