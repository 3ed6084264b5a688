package cron

import (
	"fmt"
	"time"

	_ "time/tzdata" // zones resolve even on hosts without a zoneinfo database

	"github.com/adhocore/gronx"
)

// maxSteps bounds the search for fire times: each step finds one wall-clock
// match, and DST folds can discard a few, so this is far more than n ever needs.
const maxSteps = 10000

// ParseSchedule checks a cron expression and a time zone and returns the zone.
func ParseSchedule(cron, timezone string) (*time.Location, error) {
	if _, err := normalize(cron); err != nil {
		return nil, err
	}
	return location(timezone)
}

// NextRuns returns the next n fire times of a 5-field (minute) or 6-field
// (leading seconds) cron expression (see cron.Parse for the forms) in an IANA time zone ("" = UTC), strictly
// after `after`, in UTC. The expression is matched against wall-clock time:
// a wall time skipped by a DST gap fires at the first instant after the gap;
// a wall time repeated by a DST overlap fires once, at its first occurrence.
func NextRuns(cron, timezone string, after time.Time, n int) ([]time.Time, error) {
	expr, err := normalize(cron)
	if err != nil {
		return nil, err
	}
	loc, err := location(timezone)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return []time.Time{}, nil
	}
	// gronx steps through calendar fields; doing that on a zone-less copy of
	// the wall clock keeps DST out of its arithmetic, and resolve() applies it.
	wall := wallClock(after, loc)
	runs := make([]time.Time, 0, n)
	for range maxSteps {
		next, err := gronx.NextTickAfter(expr.Gronx, wall, false)
		if err != nil {
			return nil, fmt.Errorf("cron %q: no fire time after %s: %w", cron, wall.Format(time.DateTime), err)
		}
		if !next.After(wall) {
			return nil, fmt.Errorf("cron %q: schedule does not advance past %s", cron, wall.Format(time.DateTime))
		}
		if expr.Day != nil && !expr.Day(next) {
			wall = nextDay(next) // no time of this day can match
			continue
		}
		wall = next
		at := resolve(next, loc)
		// Wall times in a gap share one instant, and in an overlap the first
		// occurrence may already be past: both are dropped here.
		if !at.After(after) || (len(runs) > 0 && !at.After(runs[len(runs)-1])) {
			continue
		}
		runs = append(runs, at.UTC())
		if len(runs) == n {
			return runs, nil
		}
	}
	return nil, fmt.Errorf("cron %q: found only %d fire times", cron, len(runs))
}

// normalize checks the expression (see cron.Parse) and returns what
// gronx evaluates, with the day-of-month rule gronx cannot express.
func normalize(cron string) (Expr, error) {
	return Parse(cron)
}

// nextDay is the last second before the day after wall's: the search goes
// on from there when wall's day fails a day rule.
func nextDay(wall time.Time) time.Time {
	return time.Date(wall.Year(), wall.Month(), wall.Day()+1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
}

// location loads a case-sensitive IANA zone; "" means UTC.
func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("timezone %q: want an IANA zone name such as Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: unknown IANA zone: %w", name, err)
	}
	return loc, nil
}

// wallClock returns t's wall-clock reading in loc as a UTC time, so calendar
// arithmetic on it never meets a DST transition.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// resolve turns a wall-clock reading (held as UTC) into the instant it names
// in loc: the earliest instant showing it, or, when a DST gap skips it, the
// first instant after the gap.
func resolve(wall time.Time, loc *time.Location) time.Time {
	// Every offset in force within 15 hours of the wall time: UTC offsets
	// span -12h..+14h, so the instant it names reads with one of them.
	offsets := map[int]bool{}
	for _, probe := range []time.Duration{-15 * time.Hour, 0, 15 * time.Hour} {
		_, off := wall.Add(probe).In(loc).Zone()
		offsets[off] = true
	}
	var best time.Time
	for off := range offsets {
		at := wall.Add(-time.Duration(off) * time.Second)
		if wallClock(at, loc).Equal(wall) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: reading the wall time with the earlier (smaller) offset lands
	// after the transition, with the later one before it; the transition
	// itself is where the zone in force before the gap ends.
	for off := range offsets {
		at := wall.Add(-time.Duration(off) * time.Second)
		if wallClock(at, loc).Before(wall) {
			if _, end := at.In(loc).ZoneBounds(); !end.IsZero() && (best.IsZero() || end.Before(best)) {
				best = end
			}
		}
	}
	if best.IsZero() {
		// Unreachable for real zone data; fall back to Go's own choice.
		return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	}
	return best
}
