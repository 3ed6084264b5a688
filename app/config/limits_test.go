package config

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsDefaultWhenUnset(t *testing.T) {
	l, err := LimitsSection{}.parse()
	if err != nil {
		t.Fatal(err)
	}
	if l != DefaultLimits() {
		t.Fatalf("limits = %+v, want the defaults %+v", l, DefaultLimits())
	}
	if l.RequestBody != 10<<20 || l.StepLog != 100<<20 || l.LogLine != 64<<10 || l.TemplateOutput != 1<<20 || l.TemplateTime != 2*time.Second ||
		l.WorkspaceSize != 1<<30 {
		t.Fatalf("defaults drifted from the documented ones: %+v", l)
	}
}

func TestLimitsParseSizesAndRates(t *testing.T) {
	one := 1
	l, err := LimitsSection{RequestBody: "2MB", StepLog: "1GiB", LogLine: "1KB", TemplateTime: "250ms",
		TemplateOutput: "4kb", LoginsInFlight: &one, LoginRate: "3/s", LoginRateAddress: "100/h", WorkspaceSize: "200MB"}.parse()
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{RequestBody: 2 << 20, StepLog: 1 << 30, LogLine: 1 << 10, TemplateTime: 250 * time.Millisecond,
		TemplateOutput: 4 << 10, LoginsInFlight: 1, LoginRate: Rate{3, time.Second}, LoginRateAddress: Rate{100, time.Hour},
		WorkspaceSize: 200 << 20}
	if l != want {
		t.Fatalf("limits = %+v, want %+v", l, want)
	}
	if got := l.LoginRate.String(); got != "3/s" {
		t.Fatalf("rate prints as %q", got)
	}
}

func TestLimitsRefuseBadValues(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		in   LimitsSection
		want string
	}{
		{LimitsSection{RequestBody: "lots"}, `limits.request_body: "lots" is not a positive size`},
		{LimitsSection{StepLog: "-1MB"}, `limits.step_log: "-1MB" is not a positive size`},
		{LimitsSection{WorkspaceSize: "big"}, `limits.workspace_size: "big" is not a positive size`},
		{LimitsSection{LogLine: "2GB"}, `limits.log_line: "2GB" is over 1GB`},
		{LimitsSection{TemplateTime: "soon"}, `limits.template_time: "soon" is not a positive duration`},
		{LimitsSection{LoginsInFlight: &zero}, `limits.logins_in_flight: must be at least 1, got 0`},
		{LimitsSection{LoginRate: "10/day"}, `limits.login_rate: "10/day" is not a rate`},
		{LimitsSection{LoginRateAddress: "0/m"}, `limits.login_rate_address: "0/m" is not a rate`},
	} {
		_, err := tc.in.parse()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}
