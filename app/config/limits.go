package config

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"golang.org/x/time/rate"
)

// LimitsSection is the server config's limits: section as written. Every
// key has a default (see DefaultLimits), so a hostile or runaway input
// always meets a bound.
type LimitsSection struct {
	RequestBody      string `yaml:"request_body"`
	StepLog          string `yaml:"step_log"`
	LogLine          string `yaml:"log_line"`
	TemplateTime     string `yaml:"template_time"`
	TemplateOutput   string `yaml:"template_output"`
	LoginsInFlight   *int   `yaml:"logins_in_flight"`
	LoginRate        string `yaml:"login_rate"`
	LoginRateAddress string `yaml:"login_rate_address"`
	WorkspaceSize    string `yaml:"workspace_size"`
}

// Limits are the effective limits, parsed and defaulted.
type Limits struct {
	RequestBody    int64         // bytes of one request body (413 beyond)
	StepLog        int64         // bytes of log one step run may write
	LogLine        int           // bytes of one log line (cut beyond)
	TemplateTime   time.Duration // wall time of one template render
	TemplateOutput int           // bytes one template render may produce
	LoginsInFlight int           // password hashes computed at once
	// LoginRate bounds login attempts per account, LoginRateAddress per
	// client address.
	LoginRate        Rate
	LoginRateAddress Rate
	// WorkspaceSize bounds the files of a workspace tarball built for
	// remote workers, the bound of their workspace_limits.total_size.
	WorkspaceSize int64
}

// Rate is an event rate written "N/s", "N/m" or "N/h".
type Rate struct {
	Events int
	Per    time.Duration
}

// Limit is the rate in golang.org/x/time/rate's terms.
func (r Rate) Limit() rate.Limit { return rate.Every(r.Per / time.Duration(r.Events)) }

func (r Rate) String() string {
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	return fmt.Sprintf("%d/%s", r.Events, unit)
}

// maxDefaultLoginsInFlight caps the default number of password hashes at
// once: each costs 19 MiB of argon2id memory, about 60-70 MB of RSS at the
// server's GOGC, so one per CPU on a big host would let a login flood take
// a gigabyte.
const maxDefaultLoginsInFlight = 4

// DefaultLimits are the limits with no limits: section.
func DefaultLimits() Limits {
	return Limits{
		RequestBody:      10 << 20,
		StepLog:          100 << 20,
		LogLine:          64 << 10,
		TemplateTime:     2 * time.Second,
		TemplateOutput:   1 << 20,
		LoginsInFlight:   min(runtime.NumCPU(), maxDefaultLoginsInFlight),
		LoginRate:        Rate{Events: 10, Per: time.Minute},
		LoginRateAddress: Rate{Events: 60, Per: time.Minute},
		WorkspaceSize:    1 << 30,
	}
}

// parse checks the section and fills in the defaults.
func (s LimitsSection) parse() (Limits, error) {
	l := DefaultLimits()
	sizes := []struct {
		key   string
		value string
		out   *int64
	}{
		{"request_body", s.RequestBody, &l.RequestBody},
		{"step_log", s.StepLog, &l.StepLog},
		{"workspace_size", s.WorkspaceSize, &l.WorkspaceSize},
	}
	for _, sz := range sizes {
		if err := parseSize("limits."+sz.key, sz.value, sz.out); err != nil {
			return l, err
		}
	}
	for _, sz := range []struct {
		key   string
		value string
		out   *int
	}{
		{"log_line", s.LogLine, &l.LogLine},
		{"template_output", s.TemplateOutput, &l.TemplateOutput},
	} {
		n := int64(*sz.out)
		if err := parseSize("limits."+sz.key, sz.value, &n); err != nil {
			return l, err
		}
		if n > 1<<30 {
			return l, fmt.Errorf("limits.%s: %q is over 1GB", sz.key, sz.value)
		}
		*sz.out = int(n)
	}
	var err error
	if l.TemplateTime, err = positiveDuration("limits.template_time", s.TemplateTime, l.TemplateTime); err != nil {
		return l, err
	}
	if s.LoginsInFlight != nil {
		if *s.LoginsInFlight < 1 {
			return l, fmt.Errorf("limits.logins_in_flight: must be at least 1, got %d", *s.LoginsInFlight)
		}
		l.LoginsInFlight = *s.LoginsInFlight
	}
	if err := parseRate("limits.login_rate", s.LoginRate, &l.LoginRate); err != nil {
		return l, err
	}
	if err := parseRate("limits.login_rate_address", s.LoginRateAddress, &l.LoginRateAddress); err != nil {
		return l, err
	}
	return l, nil
}

// parseSize reads a size such as "10MB", "64KB" or "1GiB" (K, M and G are
// powers of 1024) into out; empty keeps out's default.
func parseSize(key, value string, out *int64) error {
	if value == "" {
		return nil
	}
	n, err := units.RAMInBytes(value)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s: %q is not a positive size (e.g. 64KB, 10MB, 1GB)", key, value)
	}
	*out = n
	return nil
}

// parseRate reads "N/s", "N/m" or "N/h" into out; empty keeps out's default.
func parseRate(key, value string, out *Rate) error {
	if value == "" {
		return nil
	}
	count, unit, ok := strings.Cut(strings.TrimSpace(value), "/")
	n, err := strconv.Atoi(strings.TrimSpace(count))
	per, known := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[strings.TrimSpace(unit)]
	if !ok || err != nil || n < 1 || !known {
		return fmt.Errorf("%s: %q is not a rate (e.g. 10/m: N per s, m or h)", key, value)
	}
	*out = Rate{Events: n, Per: per}
	return nil
}
