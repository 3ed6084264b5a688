package cron

import (
	"fmt"
	"testing"
	"time"
)

// fuzzZones are the zones a fuzzed schedule runs in: UTC, and zones whose
// DST rules are unusual (half-hour and 45-minute shifts, a skipped day,
// DST suspended for Ramadan, negative DST, a two-hour shift).
var fuzzZones = []string{
	"", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"Pacific/Apia", "America/Santiago", "Asia/Tehran", "Africa/Casablanca",
	"Pacific/Chatham", "America/St_Johns", "Europe/Dublin", "Antarctica/Troll",
}

// fuzzSpan maps a fuzzed instant into 1970..2200, the clocks a server runs with.
const fuzzSpan = int64(230 * 365.25 * 24 * 3600)

// FuzzNextRuns computes the next fire times of any expression in a DST
// zone: it must return an error or exactly n strictly increasing instants
// after the start, each matching the expression on the zone's wall clock,
// or being the first instant after a DST gap that skipped the match.
func FuzzNextRuns(f *testing.F) {
	berlinSpring := time.Date(2025, 3, 29, 12, 0, 0, 0, time.UTC).Unix()
	nyFall := time.Date(2025, 11, 1, 12, 0, 0, 0, time.UTC).Unix()
	for _, s := range []struct {
		cron  string
		zone  uint8
		after int64
		n     uint8
	}{
		{"30 2 * * *", 2, berlinSpring, 5},
		{"30 1 * * *", 3, nyFall, 5},
		{"*/15 * * * *", 4, time.Date(2025, 4, 5, 14, 0, 0, 0, time.UTC).Unix(), 20},
		{"0 0 * * *", 5, time.Date(2011, 12, 29, 0, 0, 0, 0, time.UTC).Unix(), 3},
		{"0 0 30 2 *", 0, 0, 1},
		{"0 0 29 2 1", 1, berlinSpring, 3},
		{"*/7 * * * * *", 9, berlinSpring, 40},
		{"0 0 L * *", 8, berlinSpring, 4},
		{"0 9 * * 1#2", 6, berlinSpring, 4},
		{"0 0 * * 7", 10, -1, 2},
		{"@daily", 11, 1 << 40, 2},
		{"59 23 31 12 *", 12, fuzzSpan - 1, 2},
	} {
		f.Add(s.cron, s.zone, s.after, s.n)
	}
	f.Fuzz(func(t *testing.T, cron string, zone uint8, after int64, n uint8) {
		tz := fuzzZones[int(zone)%len(fuzzZones)]
		// The fuzzer has no per-input timeout: a search that does not end
		// must crash the worker so the input is kept as a failure.
		defer time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("cron %q in %q: no result after 10s", cron, tz)) }).Stop()
		secs := after % fuzzSpan
		if secs < 0 {
			secs += fuzzSpan
		}
		from := time.Unix(secs, 0).UTC()
		count := int(n % 64)

		_, parseErr := ParseSchedule(cron, tz)
		runs, err := NextRuns(cron, tz, from, count)
		if parseErr != nil {
			if err == nil {
				t.Fatalf("ParseSchedule(%q) failed (%v) but NextRuns did not", cron, parseErr)
			}
			return
		}
		if err != nil {
			return // a valid expression that never fires, or not n times
		}
		if len(runs) != count {
			t.Fatalf("%q in %q after %s: %d runs, want %d", cron, tz, from, len(runs), count)
		}
		loc, _ := location(tz)
		expr, _ := normalize(cron)
		prev := from
		for i, at := range runs {
			if at.Location() != time.UTC {
				t.Fatalf("run %d is in %v, want UTC", i, at.Location())
			}
			if !at.After(prev) {
				t.Fatalf("%q in %q after %s: run %d at %s is not after %s", cron, tz, from, i, at, prev)
			}
			prev = at
			if matches(expr, at, loc) {
				continue
			}
			if start, _ := at.In(loc).ZoneBounds(); !start.Equal(at) {
				t.Fatalf("%q in %q: run %d at %s (%s local) neither matches nor ends a DST gap",
					cron, tz, i, at, at.In(loc).Format(time.DateTime))
			}
		}
	})
}

// matches reports whether the wall clock of at in loc is due for expr.
func matches(expr Expr, at time.Time, loc *time.Location) bool {
	return expr.Matches(wallClock(at, loc))
}
