// Package cron checks cron expressions field by field, says what is
// wrong with one in words, and rewrites the forms gronx lacks (L-n, LW,
// wrap-around name ranges such as SAT-SUN or NOV-FEB, @daily...) into what
// it reads; NextRuns computes when one fires, in its time zone. The
// workflow loader, the scheduler and the API share it, so a trigger that
// loads is one that schedules.
// It must not import engine, engine/workflow or engine/workspace.
package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// Expr is a checked expression: Gronx is what gronx evaluates (seven
// fields: seconds minute hour day month weekday year), and Day, when not
// nil, is a day-of-month rule gronx cannot express (L-n, LW); a fire time
// must also satisfy it, and Gronx then has `*` for the day.
type Expr struct {
	Gronx string
	Day   func(wall time.Time) bool
}

// Matches reports whether a wall-clock time (held as UTC) is due.
func (e Expr) Matches(wall time.Time) bool {
	due, err := gronx.New().IsDue(e.Gronx, wall)
	return err == nil && due && (e.Day == nil || e.Day(wall))
}

var macros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

type field struct {
	name     string
	min, max int
	names    []string // index = value, for month and weekday
}

var (
	second  = field{name: "second", max: 59}
	minute  = field{name: "minute", max: 59}
	hour    = field{name: "hour", max: 23}
	day     = field{name: "day of month", min: 1, max: 31}
	month   = field{name: "month", min: 1, max: 12, names: []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	weekday = field{name: "weekday", max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
)

// Parse checks a 5-field (minute hour day month weekday) or 6-field
// (leading seconds) expression, or one of @yearly, @annually, @monthly,
// @weekly, @daily, @midnight, @hourly.
func Parse(cron string) (Expr, error) {
	src := strings.TrimSpace(cron)
	if src == "" {
		return Expr{}, errors.New("cron expression is empty")
	}
	if strings.HasPrefix(src, "@") {
		m, ok := macros[strings.ToLower(src)]
		if !ok {
			return Expr{}, fmt.Errorf("cron %q: unknown macro (one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)", cron)
		}
		src = m
	}
	fs := strings.Fields(src)
	var specs []field
	switch len(fs) {
	case 5:
		fs = append([]string{"0"}, fs...)
		specs = []field{second, minute, hour, day, month, weekday}
	case 6:
		specs = []field{second, minute, hour, day, month, weekday}
	default:
		return Expr{}, fmt.Errorf("cron %q: want 5 fields (minute hour day month weekday) or 6 (with leading seconds), got %d", cron, len(fs))
	}
	var e Expr
	out := make([]string, len(fs))
	for i, f := range fs {
		spec := specs[i]
		if spec.name == day.name {
			rule, err := dayRule(f)
			if err != nil {
				return Expr{}, fmt.Errorf("cron %q: %w", cron, err)
			}
			if rule != nil {
				if w := fs[5]; w != "*" && w != "?" {
					return Expr{}, fmt.Errorf("cron %q: day of month %s needs * or ? as the weekday (cron would match either)", cron, f)
				}
				e.Day, out[i] = rule, "*"
				continue
			}
		}
		g, err := spec.check(f)
		if err != nil {
			return Expr{}, fmt.Errorf("cron %q: %w", cron, err)
		}
		out[i] = g
	}
	e.Gronx = strings.Join(out, " ") + " *"
	if !gronx.IsValid(e.Gronx) {
		return Expr{}, fmt.Errorf("cron %q: invalid expression", cron)
	}
	return e, nil
}

// dayRule returns the rule of a day field gronx cannot read (L-n, LW), or
// nil for any other field.
func dayRule(f string) (func(time.Time) bool, error) {
	u := strings.ToUpper(f)
	switch {
	case u == "LW":
		return func(t time.Time) bool { return t.Day() == lastWeekday(t) }, nil
	case strings.HasPrefix(u, "L-"):
		n, err := strconv.Atoi(u[2:])
		if err != nil || n < 1 || n > 30 {
			return nil, fmt.Errorf("day of month %s: want L-1 to L-30 (days before the last)", f)
		}
		return func(t time.Time) bool { return t.Day() == lastDay(t)-n }, nil
	}
	return nil, nil
}

func lastDay(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// lastWeekday is the month's last Monday-to-Friday day.
func lastWeekday(t time.Time) int {
	d := time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC)
	switch d.Weekday() {
	case time.Saturday:
		return d.Day() - 1
	case time.Sunday:
		return d.Day() - 2
	}
	return d.Day()
}

// check validates one field and returns it in the numbers gronx reads.
func (f field) check(s string) (string, error) {
	parts := strings.Split(s, ",")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("%s %q: empty list item", f.name, s)
		}
		g, err := f.item(p)
		if err != nil {
			return "", err
		}
		out = append(out, g)
	}
	return strings.Join(out, ","), nil
}

func (f field) item(p string) (string, error) {
	u := strings.ToUpper(p)
	switch {
	case u == "*":
		return "*", nil
	case u == "?":
		if f.name != day.name && f.name != weekday.name {
			return "", fmt.Errorf("%s: ? is only for the day of month and the weekday", f.name)
		}
		return "*", nil
	case f.name == day.name && u == "L":
		return "L", nil
	case f.name == day.name && strings.HasSuffix(u, "W"):
		n, err := strconv.Atoi(u[:len(u)-1])
		if err != nil || n < 1 || n > 31 {
			return "", fmt.Errorf("day of month %s: want nW with n from 1 to 31 (the weekday nearest day n), or LW", p)
		}
		return u, nil
	case f.name == weekday.name && strings.HasSuffix(u, "L") && len(u) > 1:
		n, err := f.value(p[:len(p)-1])
		if err != nil {
			return "", err
		}
		return strconv.Itoa(n%7) + "L", nil
	case f.name == weekday.name && strings.Contains(u, "#"):
		d, k, _ := strings.Cut(p, "#")
		n, err := f.value(d)
		if err != nil {
			return "", err
		}
		if i, err := strconv.Atoi(k); err != nil || i < 1 || i > 5 {
			return "", fmt.Errorf("weekday %s: want d#k with k from 1 to 5 (the k-th such weekday of the month)", p)
		}
		return fmt.Sprintf("%d#%s", n%7, k), nil
	}
	base, step, hasStep := strings.Cut(p, "/")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 || n > f.max {
			return "", fmt.Errorf("%s %s: step %q must be a number from 1 to %d", f.name, p, step, f.max)
		}
	}
	if base == "*" {
		return "*/" + step, nil
	}
	lo, hi, isRange := strings.Cut(base, "-")
	a, err := f.value(lo)
	if err != nil {
		return "", err
	}
	if !isRange {
		if hasStep {
			return fmt.Sprintf("%d-%d/%s", a, f.max, step), nil // a/n: from a on
		}
		return strconv.Itoa(a), nil
	}
	b, err := f.value(hi)
	if err != nil {
		return "", err
	}
	if a <= b {
		g := fmt.Sprintf("%d-%d", a, b)
		if hasStep {
			g += "/" + step
		}
		return g, nil
	}
	// A range that wraps: only months and weekdays go round.
	if f.names == nil {
		return "", fmt.Errorf("%s %s: range runs backwards (write %d-%d,%d-%d)", f.name, p, a, f.max, f.min, b)
	}
	if hasStep {
		return "", fmt.Errorf("%s %s: a range that wraps round cannot take a step", f.name, p)
	}
	if f.name == weekday.name {
		if b == 0 {
			return fmt.Sprintf("%d-6,0", a), nil // FRI-SUN
		}
		return fmt.Sprintf("%d-6,0-%d", a, b), nil
	}
	return fmt.Sprintf("%d-%d,%d-%d", a, f.max, f.min, b), nil
}

// value reads a number or, for months and weekdays, a three-letter name.
func (f field) value(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < f.min || n > f.max {
			return 0, fmt.Errorf("%s %d is out of range %d-%d", f.name, n, f.min, f.max)
		}
		return n, nil
	}
	for i, name := range f.names {
		if name != "" && strings.EqualFold(s, name) {
			return i, nil
		}
	}
	hint := ""
	if strings.ContainsAny(s, "LW#") {
		hint = " (L, W and # are only for the day of month: L, L-n, LW, nW, and the weekday: dL, d#k)"
	}
	if f.names != nil {
		return 0, fmt.Errorf("%s %q: want a number from %d to %d or a name (%s-%s)%s", f.name, s, f.min, f.max, f.names[f.min], f.names[len(f.names)-1], hint)
	}
	return 0, fmt.Errorf("%s %q: want a number from %d to %d%s", f.name, s, f.min, f.max, hint)
}
