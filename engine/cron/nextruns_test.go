package cron

import (
	"strings"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestNextRunsFollowsWallClockAcrossDST(t *testing.T) {
	tests := []struct {
		name  string
		cron  string
		tz    string
		after string
		want  []string
	}{
		{
			name:  "utc by default",
			cron:  "30 2 * * *",
			after: "2025-03-29T12:00:00Z",
			want:  []string{"2025-03-30T02:30:00Z", "2025-03-31T02:30:00Z"},
		},
		{
			// 02:30 does not exist on 2025-03-30 in Berlin (02:00 CET -> 03:00 CEST).
			name:  "berlin spring-forward gap fires at 03:00 local",
			cron:  "30 2 * * *",
			tz:    "Europe/Berlin",
			after: "2025-03-29T12:00:00Z",
			want:  []string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"},
		},
		{
			// 02:30 happens twice on 2025-10-26 in Berlin (03:00 CEST -> 02:00 CET).
			name:  "berlin fall-back overlap fires once at the first occurrence",
			cron:  "30 2 * * *",
			tz:    "Europe/Berlin",
			after: "2025-10-25T12:00:00Z",
			want:  []string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"},
		},
		{
			name:  "new york spring-forward gap fires at 03:00 local",
			cron:  "30 2 * * *",
			tz:    "America/New_York",
			after: "2025-03-08T12:00:00Z",
			want:  []string{"2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"},
		},
		{
			name:  "new york fall-back 01:30 fires once",
			cron:  "30 1 * * *",
			tz:    "America/New_York",
			after: "2025-11-01T12:00:00Z",
			want:  []string{"2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z", "2025-11-04T06:30:00Z"},
		},
		{
			name:  "every 15 minutes collapses the gap into one run at its end",
			cron:  "*/15 * * * *",
			tz:    "America/New_York",
			after: "2025-03-09T06:40:00Z", // 01:40 EST
			want:  []string{"2025-03-09T06:45:00Z", "2025-03-09T07:00:00Z", "2025-03-09T07:15:00Z"},
		},
		{
			name:  "every 30 minutes does not repeat the overlap hour",
			cron:  "*/30 * * * *",
			tz:    "America/New_York",
			after: "2025-11-02T04:50:00Z", // 00:50 EDT
			want: []string{
				"2025-11-02T05:00:00Z", "2025-11-02T05:30:00Z", // 01:00, 01:30 EDT
				"2025-11-02T07:00:00Z", "2025-11-02T07:30:00Z", // 02:00, 02:30 EST
			},
		},
		{
			name:  "starting inside the second occurrence skips what already fired",
			cron:  "*/30 * * * *",
			tz:    "America/New_York",
			after: "2025-11-02T06:10:00Z", // 01:10 EST, second pass
			want:  []string{"2025-11-02T07:00:00Z"},
		},
		{
			name:  "fire time equal to after is excluded",
			cron:  "0 * * * *",
			after: "2025-01-01T10:00:00Z",
			want:  []string{"2025-01-01T11:00:00Z"},
		},
		{
			name:  "six fields lead with seconds",
			cron:  "*/20 * * * * *",
			after: "2025-01-01T10:00:05Z",
			want:  []string{"2025-01-01T10:00:20Z", "2025-01-01T10:00:40Z", "2025-01-01T10:01:00Z"},
		},
		{
			name:  "L is the last day of the month",
			cron:  "0 12 L * *",
			after: "2025-01-15T00:00:00Z",
			want:  []string{"2025-01-31T12:00:00Z", "2025-02-28T12:00:00Z", "2025-03-31T12:00:00Z"},
		},
		{
			name:  "5L is the last friday",
			cron:  "0 9 * * 5L",
			after: "2025-01-01T00:00:00Z",
			want:  []string{"2025-01-31T09:00:00Z", "2025-02-28T09:00:00Z"},
		},
		{
			name:  "hash is the nth weekday",
			cron:  "0 9 * * 1#2",
			after: "2025-01-01T00:00:00Z",
			want:  []string{"2025-01-13T09:00:00Z", "2025-02-10T09:00:00Z"},
		},
		{
			// 2025-03-15 is a Saturday: the nearest weekday is Friday the 14th.
			name:  "W is the nearest weekday",
			cron:  "0 9 15W * *",
			after: "2025-03-01T00:00:00Z",
			want:  []string{"2025-03-14T09:00:00Z"},
		},
		{
			name:  "month and day names",
			cron:  "0 9 * feb MON-wed",
			after: "2025-01-30T00:00:00Z",
			want:  []string{"2025-02-03T09:00:00Z", "2025-02-04T09:00:00Z", "2025-02-05T09:00:00Z", "2025-02-10T09:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NextRuns(tt.cron, tt.tz, utc(tt.after), len(tt.want))
			if err != nil {
				t.Fatalf("NextRuns: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d runs %v, want %v", len(got), got, tt.want)
			}
			for i := range got {
				if !got[i].Equal(utc(tt.want[i])) {
					t.Errorf("run %d = %s, want %s", i, got[i].Format(time.RFC3339), tt.want[i])
				}
				if got[i].Location() != time.UTC {
					t.Errorf("run %d is in %s, want UTC", i, got[i].Location())
				}
			}
		})
	}
}

// The cron forms beyond gronx's own: L-n, LW, wrap-around name ranges,
// macros; each against a calendar.
func TestNextRunsAcceptsExtendedForms(t *testing.T) {
	tests := []struct {
		cron, after string
		want        []string
	}{
		{"0 0 L * *", "2025-01-10T12:00:00Z", []string{"2025-01-31", "2025-02-28", "2025-03-31"}},
		{"0 0 L-2 * *", "2025-01-10T12:00:00Z", []string{"2025-01-29", "2025-02-26", "2025-03-29"}},
		{"0 0 L-30 * *", "2025-01-10T12:00:00Z", []string{"2025-03-01", "2025-05-01", "2025-07-01"}},   // never in 30-day months or February
		{"0 0 LW * *", "2025-04-01T00:00:00Z", []string{"2025-04-30", "2025-05-30", "2025-06-30"}},     // May 31 is a Saturday
		{"0 0 lw * ?", "2025-08-01T00:00:00Z", []string{"2025-08-29", "2025-09-30", "2025-10-31"}},     // Aug 31 is a Sunday
		{"30 0 0 L-1 * *", "2024-02-01T00:00:00Z", []string{"2024-02-28", "2024-03-30", "2024-04-29"}}, // leap year; seconds field
		{"0 0 15W * *", "2025-02-01T00:00:00Z", []string{"2025-02-14", "2025-03-14", "2025-04-15"}},
		{"0 0 * * SAT-SUN", "2025-01-10T12:00:00Z", []string{"2025-01-11", "2025-01-12", "2025-01-18"}},
		{"0 0 * * FRI-MON", "2025-01-08T12:00:00Z", []string{"2025-01-10", "2025-01-11", "2025-01-12", "2025-01-13", "2025-01-17"}},
		{"0 0 * * sun-sat/3", "2025-01-08T12:00:00Z", []string{"2025-01-11", "2025-01-12", "2025-01-15"}}, // Sun, Wed, Sat
		{"0 0 1 JAN-MAR *", "2025-01-10T12:00:00Z", []string{"2025-02-01", "2025-03-01", "2026-01-01"}},
		{"0 0 1 NOV-FEB *", "2025-01-10T12:00:00Z", []string{"2025-02-01", "2025-11-01", "2025-12-01", "2026-01-01"}},
		{"0 0 * * 5L", "2025-01-10T12:00:00Z", []string{"2025-01-31", "2025-02-28", "2025-03-28"}},
		{"0 0 * * FRI#2", "2025-01-20T12:00:00Z", []string{"2025-02-14", "2025-03-14"}},
		{"@monthly", "2025-01-10T12:00:00Z", []string{"2025-02-01", "2025-03-01"}},
		{"@weekly", "2025-01-10T12:00:00Z", []string{"2025-01-12", "2025-01-19"}},
	}
	for _, tt := range tests {
		t.Run(tt.cron, func(t *testing.T) {
			got, err := NextRuns(tt.cron, "", utc(tt.after), len(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			var days []string
			for _, g := range got {
				days = append(days, g.Format(time.DateOnly))
			}
			if strings.Join(days, " ") != strings.Join(tt.want, " ") {
				t.Errorf("runs %v, want %v", days, tt.want)
			}
		})
	}
}

func TestNextRunsRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, cron, tz, wantErr string
	}{
		{"empty expression", "", "", "empty"},
		{"too few fields", "* * *", "", "got 3"},
		{"too many fields", "0 0 0 1 1 * 2030", "", "got 7"},
		{"year in the sixth field", "0 0 1 1 * 2030", "", "weekday 2030 is out of range 0-7"},
		{"minute out of range", "61 * * * *", "", "minute 61 is out of range 0-59"},
		{"garbage", "every day at noon please", "", `minute "every": want a number from 0 to 59`},
		{"L-n past the month", "0 0 L-31 * *", "", "day of month L-31: want L-1 to L-30"},
		{"L-n with a weekday", "0 0 L-2 * MON", "", "day of month L-2 needs * or ? as the weekday"},
		{"L in the hour", "0 L * * *", "", "L, W and # are only for the day of month"},
		{"L alone as the weekday", "0 0 * * L", "", `weekday "L"`},
		{"W alone", "0 0 W * *", "", "day of month W: want nW with n from 1 to 31"},
		{"nW past 31", "0 0 32W * *", "", "want nW with n from 1 to 31"},
		{"d#k past 5", "0 0 * * MON#6", "", "want d#k with k from 1 to 5"},
		{"unknown month name", "0 0 1 JANUARY *", "", `month "JANUARY": want a number from 1 to 12 or a name (JAN-DEC)`},
		{"wrapping hours", "0 22-2 * * *", "", "hour 22-2: range runs backwards (write 22-23,0-2)"},
		{"wrapping range with a step", "0 0 * * FRI-MON/2", "", "a range that wraps round cannot take a step"},
		{"zero step", "*/0 * * * *", "", "step"},
		{"unknown macro", "@fortnightly", "", "unknown macro"},
		{"unknown zone", "0 * * * *", "Mars/Olympus", "unknown IANA zone"},
		{"Local is not a zone name", "0 * * * *", "Local", "IANA zone name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NextRuns(tt.cron, tt.tz, utc("2025-01-01T00:00:00Z"), 5)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := ParseSchedule(tt.cron, tt.tz); err == nil {
				t.Fatalf("ParseSchedule accepted %q in %q", tt.cron, tt.tz)
			}
		})
	}
}

func TestNextRunsWithZeroCountIsEmpty(t *testing.T) {
	got, err := NextRuns("0 * * * *", "UTC", utc("2025-01-01T00:00:00Z"), 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want no runs", got, err)
	}
}

func TestNextRunsReportsImpossibleSchedule(t *testing.T) {
	if _, err := NextRuns("0 0 30 2 *", "", utc("2025-01-01T00:00:00Z"), 1); err == nil {
		t.Fatal("February 30th produced a fire time")
	}
}
