package audit

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// stored is an entry as the stores keep it: the same fields as Entry
// under one-letter keys, the time in Unix microseconds, the MAC's 32
// bytes in base64 and an ok outcome left out, so a typical entry takes
// under 300 bytes on disk. It converts to and from Entry exactly; the
// API, exports and the MAC use Entry's own JSON and canonical encoding.
// A field left zero is left out (never the case for a bbolt entry), so a
// store that keeps some fields in columns of their own (PostgreSQL)
// encodes the rest alone by zeroing them: Seq, Actor, Action, Target and
// MAC, and At as time.UnixMicro(0).
type stored struct {
	Seq     int64  `json:"q,omitempty"`
	At      int64  `json:"t,omitempty"`
	ID      string `json:"u,omitempty"`
	Email   string `json:"e,omitempty"`
	Key     string `json:"k,omitempty"`
	Source  string `json:"s"`
	Action  string `json:"a,omitempty"`
	Target  string `json:"g,omitempty"`
	Outcome string `json:"o,omitempty"` // "" is ok
	Reason  string `json:"r,omitempty"`
	Client  string `json:"c,omitempty"`
	Dropped int64  `json:"d,omitempty"`
	MAC     string `json:"m,omitempty"`
}

// MarshalStored encodes e for a store.
func MarshalStored(e *Entry) ([]byte, error) {
	s := stored{Seq: e.Seq, At: e.At.UnixMicro(), ID: e.Actor.ID, Email: e.Actor.Email, Key: e.Actor.Key,
		Source: e.Source, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Reason: e.Reason,
		Client: e.ClientAddress, Dropped: e.Dropped, MAC: e.MAC}
	if s.Outcome == OK {
		s.Outcome = ""
	}
	// A MAC this package made is hex; anything else (an import of a
	// damaged export) is kept as it is, prefixed so it reads back the same.
	if e.MAC == "" {
		s.MAC = ""
	} else if raw, err := hex.DecodeString(e.MAC); err == nil && len(raw) == 32 && hex.EncodeToString(raw) == e.MAC {
		s.MAC = base64.RawURLEncoding.EncodeToString(raw)
	} else {
		s.MAC = "!" + e.MAC
	}
	return json.Marshal(&s)
}

// UnmarshalStored decodes what MarshalStored wrote.
func UnmarshalStored(data []byte) (Entry, error) {
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return Entry{}, fmt.Errorf("decode audit entry: %w", err)
	}
	e := Entry{Seq: s.Seq, At: time.UnixMicro(s.At).UTC(), Actor: Actor{ID: s.ID, Email: s.Email, Key: s.Key},
		Source: s.Source, Action: s.Action, Target: s.Target, Outcome: s.Outcome, Reason: s.Reason,
		ClientAddress: s.Client, Dropped: s.Dropped}
	if e.Outcome == "" {
		e.Outcome = OK
	}
	switch {
	case len(s.MAC) > 0 && s.MAC[0] == '!':
		e.MAC = s.MAC[1:]
	default:
		raw, err := base64.RawURLEncoding.DecodeString(s.MAC)
		if err != nil {
			return Entry{}, fmt.Errorf("decode audit entry %d: its mac: %w", s.Seq, err)
		}
		e.MAC = hex.EncodeToString(raw)
	}
	return e, nil
}
