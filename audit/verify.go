package audit

import (
	"crypto/hmac"
	"fmt"
)

// Break is the first place a chain does not hold: the entry's sequence
// number and what is wrong with it.
type Break struct {
	Seq    int64
	Reason string
}

func (b *Break) Error() string { return fmt.Sprintf("audit entry %d: %s", b.Seq, b.Reason) }

// Verifier checks a chain entry by entry, oldest first, from an anchor
// (the zero Head, or the last entry retention dropped). Feed it with
// Next, then call End.
type Verifier struct {
	key    Key
	head   Head
	logged *Head
	n      int64
}

// NewVerifier starts a check at anchor, against a head the server logged
// (nil: none known): the chain must reach it and hold it there, or its
// newest entries were removed, or that one changed.
func NewVerifier(key Key, anchor Head, logged *Head) *Verifier {
	if logged != nil && logged.Seq == 0 {
		logged = nil
	}
	return &Verifier{key: key, head: anchor, logged: logged}
}

// Next checks the entry after the last one: its number follows on (else
// an entry was removed, or entries reordered) and its MAC is the one the
// key gives over the previous MAC and its content (else it was changed).
func (v *Verifier) Next(e *Entry) error {
	want := v.head.Seq + 1
	switch {
	case e.Seq > want:
		return &Break{Seq: want, Reason: fmt.Sprintf("missing: removed or moved (entry %d stands in its place)", e.Seq)}
	case e.Seq < want:
		return &Break{Seq: e.Seq, Reason: fmt.Sprintf("out of order: found after entry %d", v.head.Seq)}
	}
	if !hmac.Equal([]byte(MAC(v.key, v.head.MAC, e)), []byte(e.MAC)) {
		return &Break{Seq: e.Seq, Reason: "changed: its MAC does not match its content and the previous entry's MAC"}
	}
	if v.logged != nil && e.Seq == v.logged.Seq && e.MAC != v.logged.MAC {
		return &Break{Seq: e.Seq, Reason: "changed: its MAC differs from the logged head's"}
	}
	v.head = e.Head()
	v.n++
	return nil
}

// Head is the last entry checked (the anchor before any).
func (v *Verifier) Head() Head { return v.head }

// Count is how many entries were checked.
func (v *Verifier) Count() int64 { return v.n }

// End checks that the chain reached the logged head.
func (v *Verifier) End() error {
	if v.logged != nil && v.head.Seq < v.logged.Seq {
		return &Break{Seq: v.head.Seq + 1, Reason: fmt.Sprintf("missing at the end: the chain stops at %d, the logged head is %d", v.head.Seq, v.logged.Seq)}
	}
	return nil
}

// Verify checks entries (oldest first) from anchor to a logged head.
func Verify(key Key, anchor Head, entries []Entry, logged *Head) error {
	v := NewVerifier(key, anchor, logged)
	for i := range entries {
		if err := v.Next(&entries[i]); err != nil {
			return err
		}
	}
	return v.End()
}
