package membership

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	want := Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second}
	if got := (Config{}).WithDefaults(); got != want {
		t.Fatalf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	set := Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 50 * time.Millisecond}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("WithDefaults changed set fields: %+v", got)
	}
	if got := New(Config{}).Config(); got != want {
		t.Fatalf("New(Config{}).Config() = %+v, want %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		c    Config
		want string // the error; "" for valid
	}{
		{Config{}, ""},
		{Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 200 * time.Millisecond}, ""},
		{Config{HeartbeatInterval: 2 * time.Second}, ""}, // default timeout 5s
		{Config{HeartbeatTimeout: 2 * time.Second}, ""},  // default interval 1s
		{Config{HeartbeatInterval: -time.Second},
			"membership: invalid config: HeartbeatInterval -1s, want > 0"},
		{Config{HeartbeatTimeout: -time.Second},
			"membership: invalid config: HeartbeatTimeout -1s, want > 0"},
		{Config{HeartbeatTimeout: time.Second},
			"membership: invalid config: HeartbeatTimeout 1s must exceed HeartbeatInterval 1s"},
		{Config{HeartbeatInterval: 6 * time.Second},
			"membership: invalid config: HeartbeatTimeout 5s must exceed HeartbeatInterval 6s"},
	}
	for _, tt := range tests {
		err := tt.c.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tt.c, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: error %v, want %q wrapping ErrInvalid", tt.c, err, tt.want)
		}
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !strings.Contains(err.Error(), "HeartbeatTimeout") {
			t.Fatalf("New panicked with %v, want the validation error", r)
		}
	}()
	New(Config{HeartbeatTimeout: time.Second})
}
