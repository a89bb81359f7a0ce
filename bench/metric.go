package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// notMeasured is how the table prints a metric that was not measured or does
// not apply.
const notMeasured = "–"

// metric is a measured value, or nothing: the zero metric was not measured
// or does not apply (no record reached the sink, no time elapsed, no
// checkpoint completed, nothing to compare with). It is never NaN or Inf: it
// prints as "–" and serialises as JSON null.
type metric struct {
	v  float64
	ok bool
}

// measured is v, or not measured when v is NaN or infinite.
func measured(v float64) metric {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return metric{}
	}
	return metric{v: v, ok: true}
}

// per is n/d, not measured when d is not positive (0 records in 0 s).
func per(n, d float64) metric {
	if d <= 0 {
		return metric{}
	}
	return measured(n / d)
}

// msOf is d in milliseconds (to the microsecond).
func msOf(d time.Duration) metric { return measured(float64(d.Microseconds()) / 1000) }

// value is the metric's value and whether it was measured.
func (m metric) value() (float64, bool) { return m.v, m.ok }

// or is the value, or def when not measured.
func (m metric) or(def float64) float64 {
	if !m.ok {
		return def
	}
	return m.v
}

// cell formats the value with decimals digits after the point and thousands
// separators, or "–".
func (m metric) cell(decimals int) string {
	if !m.ok {
		return notMeasured
	}
	return thousands(m.v, decimals)
}

// MarshalJSON writes the value, or null when not measured.
func (m metric) MarshalJSON() ([]byte, error) {
	if !m.ok {
		return []byte("null"), nil
	}
	return json.Marshal(m.v)
}

// UnmarshalJSON reads a number, or null as not measured.
func (m *metric) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = metric{}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("bench: metric %s: %w", b, err)
	}
	*m = measured(v)
	return nil
}

// thousands formats v with decimals digits after the point and a comma
// between groups of three digits before it: 12345678.9 -> "12,345,678.90".
func thousands(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	b.WriteString(sign)
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// count formats n with thousands separators.
func count(n int64) string { return thousands(float64(n), 0) }
