package restart

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestWithDefaults(t *testing.T) {
	want := Policy{
		InitialBackoff: 10 * time.Millisecond,
		MaxBackoff:     5 * time.Second,
		Multiplier:     2,
		Jitter:         0.2,
		MaxFailures:    10,
		Window:         time.Minute,
	}
	if got := (Policy{}).WithDefaults(); got != want {
		t.Fatalf("Policy{}.WithDefaults() = %+v, want %+v", got, want)
	}
	set := Policy{InitialBackoff: time.Second, MaxBackoff: time.Hour, Multiplier: 1.5, Jitter: 0.5, MaxFailures: 3, Window: time.Hour}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("WithDefaults changed set fields: %+v", got)
	}
	if got := New(Policy{}).Policy(); got != want {
		t.Fatalf("New(Policy{}).Policy() = %+v", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p    Policy
		want string // substring of the error; "" for valid
	}{
		{Policy{}, ""},
		{Policy{Multiplier: 1, Jitter: 0.99, MaxBackoff: 10 * time.Millisecond}, ""},
		{Policy{InitialBackoff: -1}, "restart: negative initial backoff"},
		{Policy{MaxBackoff: -time.Second}, "restart: negative max backoff"},
		{Policy{MaxBackoff: time.Millisecond}, "restart: max backoff 1ms below initial backoff 10ms"},
		{Policy{Multiplier: 0.5}, "restart: multiplier 0.5"},
		{Policy{Multiplier: math.NaN()}, "restart: multiplier NaN"},
		{Policy{Multiplier: math.Inf(1)}, "restart: multiplier +Inf"},
		{Policy{Jitter: 1}, "restart: jitter 1"},
		{Policy{Jitter: -0.1}, "restart: jitter -0.1"},
		{Policy{Jitter: math.NaN()}, "restart: jitter NaN"},
		{Policy{MaxFailures: -2}, "restart: max failures -2"},
		{Policy{Window: -time.Minute}, "restart: negative window"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tt.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.p, err, tt.want)
		}
	}
}

func TestNewPanicsOnInvalidPolicy(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("New did not panic")
		}
	}()
	New(Policy{Jitter: 2})
}
