package coordinator

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{Config{}, ""},
		{Config{Interval: time.Second, Timeout: time.Minute, MinPause: time.Second, TolerableFailures: -1}, ""},
		{Config{Interval: -1}, "coordinator: negative interval"},
		{Config{Timeout: -1}, "coordinator: negative timeout"},
		{Config{MinPause: -time.Second}, "coordinator: negative min pause"},
		{Config{TolerableFailures: -2}, "coordinator: tolerable failures -2"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tt.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestNewPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"invalid config": func() { New(Config{Interval: -1}, nil, 1) },
		"duplicate task": func() { New(Config{}, []string{"a", "b", "a"}, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestNewIDZeroIsOne(t *testing.T) {
	c := New(Config{}, []string{"a"}, 0)
	if c.NextID() != 1 {
		t.Fatalf("NextID() = %d, want 1", c.NextID())
	}
}

func TestActionKindString(t *testing.T) {
	if s := FailJob.String(); s != "FailJob" {
		t.Fatalf("FailJob.String() = %q", s)
	}
	if s := ActionKind(0).String(); s != "ActionKind(0)" {
		t.Fatalf("ActionKind(0).String() = %q", s)
	}
}
