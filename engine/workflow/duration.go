package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// durationRe accepts the format's durations: whole units in descending
// order, e.g. "90s", "1h30m", "7d".
var durationRe = regexp.MustCompile(`^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$`)

// maxDuration keeps the arithmetic below far from overflow.
const maxDuration = 100 * 365 * 24 * time.Hour

// ParseDuration reads "30s", "1h30m", "7d" or a plain number of seconds.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return secondsDuration(n)
	}
	m := durationRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid duration %q (use e.g. 30s, 5m, 1h30m or a number of seconds)", s)
	}
	var total int64
	for i, unit := range []int64{86400, 3600, 60, 1} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(maxDuration/time.Second) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += n * unit
	}
	return secondsDuration(total)
}

func secondsDuration(n int64) (Duration, error) {
	if n < 0 {
		return 0, fmt.Errorf("duration %d is negative", n)
	}
	if n > int64(maxDuration/time.Second) {
		return 0, fmt.Errorf("duration %ds is too long", n)
	}
	return Duration(time.Duration(n) * time.Second), nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String writes the duration the way people write it: "1h30m", "45s", "0s".
func (d Duration) String() string {
	t := time.Duration(d)
	if t%time.Second != 0 {
		return t.String()
	}
	secs := int64(t / time.Second)
	if secs == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		n      int64
		suffix string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if secs >= u.n {
			fmt.Fprintf(&b, "%d%s", secs/u.n, u.suffix)
			secs %= u.n
		}
	}
	return b.String()
}

// MarshalJSON writes the duration as a string such as "1h30m".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("decode duration: %w", err)
	}
	return d.set(v)
}

// UnmarshalYAML reads a duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return fmt.Errorf("decode duration: %w", err)
	}
	return d.set(v)
}

// MarshalYAML writes the duration as a string such as "1h30m".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) set(v any) error {
	var err error
	switch t := v.(type) {
	case nil:
		*d = 0
	case string:
		*d, err = ParseDuration(t)
	case float64:
		if t != float64(int64(t)) {
			return fmt.Errorf("duration %v is not a whole number of seconds", t)
		}
		*d, err = secondsDuration(int64(t))
	case int:
		*d, err = secondsDuration(int64(t))
	case int64:
		*d, err = secondsDuration(t)
	case uint64:
		if t > uint64(maxDuration/time.Second) {
			return fmt.Errorf("duration %ds is too long", t)
		}
		*d, err = secondsDuration(int64(t))
	default:
		return fmt.Errorf("invalid duration %v", v)
	}
	return err
}
