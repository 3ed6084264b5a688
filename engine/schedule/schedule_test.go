package schedule

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

func TestNextRunsRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, cron, tz, wantErr string
	}{
		{"empty expression", "", "", "empty"},
		{"too few fields", "* * *", "", "got 3"},
		{"too many fields", "0 0 0 1 1 * 2030", "", "got 7"},
		{"year in the sixth field", "0 0 1 1 * 2030", "", "invalid expression"},
		{"minute out of range", "61 * * * *", "", "invalid expression"},
		{"garbage", "every day at noon please", "", "invalid expression"},
		{"unknown zone", "0 * * * *", "Mars/Olympus", "unknown IANA zone"},
		{"Local is not a zone name", "0 * * * *", "Local", "IANA zone name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NextRuns(tt.cron, tt.tz, utc("2025-01-01T00:00:00Z"), 5)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := Parse(tt.cron, tt.tz); err == nil {
				t.Fatalf("Parse accepted %q in %q", tt.cron, tt.tz)
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
