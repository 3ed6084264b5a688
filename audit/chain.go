package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Key is the chain's HMAC key (audit.key): kept in the config or the
// environment, never in the database, so someone who can write the
// database cannot recompute the chain after an edit.
type Key []byte

// MinKeyLen is the shortest key accepted: 16 bytes, 128 bits.
const MinKeyLen = 16

// ErrNoKey: a chain cannot be signed or checked without its key.
var ErrNoKey = errors.New("audit: no key")

// canonical is Entry without its MAC, its fields declared in the sorted
// order of their JSON names (encoding/json writes a struct's fields in
// declaration order), so its encoding is JSON with sorted keys.
type canonical struct {
	Action        string         `json:"action"`
	Actor         canonicalActor `json:"actor"`
	At            string         `json:"at"`
	ClientAddress string         `json:"client_address"`
	Dropped       int64          `json:"dropped"`
	Outcome       string         `json:"outcome"`
	Reason        string         `json:"reason"`
	Seq           int64          `json:"seq"`
	Source        string         `json:"source"`
	Target        string         `json:"target"`
}

type canonicalActor struct {
	Email string `json:"email"`
	ID    string `json:"id"`
	Key   string `json:"key"`
}

// Canonical is the entry's canonical encoding, what its MAC covers:
// every field but mac, as one JSON object with its keys sorted, every key
// present (empty strings and zeros included), no whitespace, no HTML
// escaping, and the time as RFC 3339 in UTC with microseconds
// ("2006-01-02T15:04:05.000000Z"). Sorted keys and fixed formats make it
// reproducible by any JSON library, not only this one.
func Canonical(e *Entry) []byte {
	c := canonical{
		Action: e.Action, At: FormatTime(e.At), ClientAddress: e.ClientAddress, Dropped: e.Dropped,
		Outcome: e.Outcome, Reason: e.Reason, Seq: e.Seq, Source: e.Source, Target: e.Target,
		Actor: canonicalActor{Email: e.Actor.Email, ID: e.Actor.ID, Key: e.Actor.Key},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c) // strings and ints only: it cannot fail
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// FormatTime is the canonical time text; Truncate puts a time at the
// precision it keeps, so a stored entry round-trips exactly.
func FormatTime(t time.Time) string { return Truncate(t).Format("2006-01-02T15:04:05.000000Z") }

// Truncate returns t in UTC to the microsecond.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// MAC is HMAC-SHA-256 under key over the previous entry's MAC (its hex
// text; "" before the first entry, or the anchor retention left), a
// newline, and the entry's canonical encoding; hex-encoded.
func MAC(key Key, prev string, e *Entry) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prev))
	m.Write([]byte{'\n'})
	m.Write(Canonical(e))
	return hex.EncodeToString(m.Sum(nil))
}

// Append numbers and signs e as the entry after head, and returns the
// new head. Stores call it inside the transaction that holds the chain's
// one appender lock (bbolt's writer; PostgreSQL's head row).
func Append(key Key, head Head, e *Entry) Head {
	clean(e)
	e.Seq = head.Seq + 1
	e.At = Truncate(e.At)
	e.MAC = MAC(key, head.MAC, e)
	return e.Head()
}

// MaxField bounds each text field of an entry: a failed sign-in's email
// is whatever the caller typed, and the trail must stay small.
const MaxField = 256

// clean makes every text field storable by both stores and bounded:
// valid UTF-8 without NUL bytes (PostgreSQL's text refuses them, and a
// caller's bad input must never fail the commit it rides), at most
// MaxField bytes.
func clean(e *Entry) {
	for _, f := range []*string{&e.Actor.ID, &e.Actor.Email, &e.Actor.Key, &e.Source, &e.Action, &e.Target, &e.Outcome, &e.Reason, &e.ClientAddress} {
		*f = cleanText(*f)
	}
}

func cleanText(s string) string {
	if len(s) > MaxField {
		s = s[:MaxField]
	}
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	s = strings.ToValidUTF8(s, "\ufffd")
	return strings.ReplaceAll(s, "\x00", "\ufffd")
}
