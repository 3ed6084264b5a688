package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/audit"
)

var key = audit.Key("0123456789abcdef0123456789abcdef")

func chain(n int) ([]audit.Entry, audit.Head) {
	var head audit.Head
	out := make([]audit.Entry, n)
	for i := range out {
		out[i] = audit.Entry{
			At:    time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC).Add(time.Duration(i) * time.Second),
			Actor: audit.Actor{ID: "u1", Email: "ann@example.com"}, Source: audit.SourceUser,
			Action: audit.JobExecute, Target: "job/j" + string(rune('a'+i)), Outcome: audit.OK, ClientAddress: "10.0.0.1",
		}
		head = audit.Append(key, head, &out[i])
	}
	return out, head
}

func TestCanonicalHasSortedKeysAndNoMAC(t *testing.T) {
	es, _ := chain(1)
	c := audit.Canonical(&es[0])
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(c))
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' {
				depth++
				expectKey = true
				continue
			}
			if v == '}' {
				depth--
			}
		case string:
			if expectKey && depth == 1 {
				keys = append(keys, v)
			}
		}
		expectKey = depth >= 1 && dec.More() && !expectKey
	}
	if !slices.IsSorted(keys) || len(keys) < 8 {
		t.Fatalf("top-level keys %v: want sorted, every field", keys)
	}
	if bytes.Contains(c, []byte(`"mac"`)) || bytes.ContainsAny(c, " \n") {
		t.Fatalf("canonical %s: has mac or whitespace", c)
	}
	if !bytes.Contains(c, []byte(`"at":"2025-01-02T03:04:05.123456Z"`)) {
		t.Fatalf("canonical %s: time not in UTC to the µs", c)
	}
}

func TestChainVerifies(t *testing.T) {
	es, head := chain(5)
	if err := audit.Verify(key, audit.Head{}, es, &head); err != nil {
		t.Fatal(err)
	}
	// From an anchor left by retention.
	if err := audit.Verify(key, es[1].Head(), es[2:], &head); err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(audit.Key("another key of sixteen+"), audit.Head{}, es, &head); !isBreak(err, 1, "changed") {
		t.Fatalf("wrong key: %v", err)
	}
}

func isBreak(err error, seq int64, reason string) bool {
	var b *audit.Break
	return errors.As(err, &b) && b.Seq == seq && strings.HasPrefix(b.Reason, reason)
}

func TestTamperingIsCaughtAtTheFirstBrokenEntry(t *testing.T) {
	cases := []struct {
		name   string
		tamper func([]audit.Entry) []audit.Entry
		seq    int64
		reason string
	}{
		{"edited", func(es []audit.Entry) []audit.Entry { es[2].Actor.Email = "eve@example.com"; return es }, 3, "changed"},
		{"edited and renumbered", func(es []audit.Entry) []audit.Entry { es[1].Outcome = audit.Denied; return es }, 2, "changed"},
		{"deleted", func(es []audit.Entry) []audit.Entry { return slices.Delete(es, 1, 2) }, 2, "missing"},
		{"swapped", func(es []audit.Entry) []audit.Entry { es[1], es[2] = es[2], es[1]; return es }, 2, "missing"},
		{"swapped and renumbered", func(es []audit.Entry) []audit.Entry {
			es[1], es[2] = es[2], es[1]
			es[1].Seq, es[2].Seq = 2, 3
			return es
		}, 2, "changed"},
		{"truncated", func(es []audit.Entry) []audit.Entry { return es[:3] }, 4, "missing at the end"},
		{"last replaced", func(es []audit.Entry) []audit.Entry {
			es[4].Target = "job/other"
			es[4].MAC = audit.MAC(audit.Key("attacker's own key!!"), es[3].MAC, &es[4])
			return es
		}, 5, "changed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es, head := chain(5)
			err := audit.Verify(key, audit.Head{}, c.tamper(es), &head)
			if !isBreak(err, c.seq, c.reason) {
				t.Fatalf("got %v, want entry %d %s", err, c.seq, c.reason)
			}
		})
	}
}

func TestQueueDropsWhenFullAndSaysSoInTheNextEntry(t *testing.T) {
	q := audit.NewQueue(2)
	woken := 0
	q.OnPush(func() { woken++ })
	for range 5 {
		q.Push(audit.Entry{Action: audit.RequestDenied})
	}
	if got := q.Take(); len(got) != 2 || got[0].Dropped != 0 {
		t.Fatalf("took %+v", got)
	}
	q.Push(audit.Entry{Action: audit.RequestDenied})
	got := q.Take()
	if len(got) != 1 || got[0].Dropped != 3 || q.Dropped() != 3 || woken != 3 {
		t.Fatalf("after drops: %+v, total %d, woken %d", got, q.Dropped(), woken)
	}
}

func TestFilterMatches(t *testing.T) {
	e := audit.Entry{Actor: audit.Actor{ID: "u1", Email: "a@x", Key: "ci"}, Action: audit.JobCancel, Target: "job/1", At: time.Unix(100, 0)}
	for _, c := range []struct {
		f    audit.Filter
		want bool
	}{
		{audit.Filter{Actor: "a@x"}, true}, {audit.Filter{Actor: "ci"}, true}, {audit.Filter{Actor: "b"}, false},
		{audit.Filter{Action: "job."}, true}, {audit.Filter{Action: "job"}, false}, {audit.Filter{Action: audit.JobCancel}, true},
		{audit.Filter{Target: "job/1"}, true}, {audit.Filter{Target: "job/2"}, false},
		{audit.Filter{Since: time.Unix(100, 0), Until: time.Unix(101, 0)}, true}, {audit.Filter{Until: time.Unix(100, 0)}, false},
	} {
		if got := c.f.Match(&e); got != c.want {
			t.Errorf("%+v: got %v", c.f, got)
		}
	}
}

// The stores' compact encoding gives back exactly the entry, MAC and
// outcome included, and an entry whose MAC is not this package's (a
// damaged import) reads back as it was, still failing the check.
func TestStoredEncodingRoundTripsExactly(t *testing.T) {
	es, _ := chain(2)
	es[1].Outcome, es[1].Reason, es[1].Dropped, es[1].Actor.Key = audit.Denied, "no scope", 3, "ci"
	odd := es[0]
	odd.MAC = "not-a-mac"
	for _, e := range []audit.Entry{es[0], es[1], odd} {
		data, err := audit.MarshalStored(&e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := audit.UnmarshalStored(data)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(e)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Errorf("round trip:\n got %s\nwant %s", b, a)
		}
	}
}

// Text a caller typed is stored cleaned: no NUL, valid UTF-8, bounded.
func TestEntriesAreCleanedBeforeTheyAreSigned(t *testing.T) {
	e := audit.Entry{Actor: audit.Actor{Email: "a\x00b\xff" + strings.Repeat("x", 1000)}, Action: audit.SignIn}
	audit.Append(key, audit.Head{}, &e)
	if strings.ContainsRune(e.Actor.Email, 0) || !utf8.ValidString(e.Actor.Email) || len(e.Actor.Email) > audit.MaxField+8 {
		t.Fatalf("email stored as %q", e.Actor.Email)
	}
	if err := audit.Verify(key, audit.Head{}, []audit.Entry{e}, nil); err != nil {
		t.Fatal(err)
	}
}
