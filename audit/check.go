package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// ParseHead reads a head as the server logs it, "SEQ:MAC".
func ParseHead(s string) (Head, error) {
	seq, mac, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || mac == "" {
		return Head{}, fmt.Errorf("head %q: want SEQ:MAC, as the server logs it (audit chain head seq=… mac=…)", s)
	}
	return Head{Seq: n, MAC: mac}, nil
}

// String is the head as ParseHead reads it.
func (h Head) String() string { return strconv.FormatInt(h.Seq, 10) + ":" + h.MAC }

// VerifyStore checks the chain a store holds, from its anchor to logged
// (a head the server logged; nil: the head the store holds, which only
// catches a truncation that left the head row alone). err is a failure
// to read, broken what the check found (a *Break).
func VerifyStore(ctx context.Context, key Key, st Store, logged *Head) (v *Verifier, broken, err error) {
	anchor, head, err := st.AuditHeads(ctx)
	if err != nil {
		return nil, nil, err
	}
	if logged == nil {
		logged = &head
	}
	v = NewVerifier(key, anchor, logged)
	const page = 1000
	for after := anchor.Seq; ; {
		// Unfiltered pages from the anchor: a gap is the verifier's to see.
		es, err := st.AuditEntries(ctx, Filter{After: after, Limit: page})
		if err != nil {
			return nil, nil, err
		}
		for i := range es {
			if broken := v.Next(&es[i]); broken != nil {
				return v, broken, nil
			}
		}
		if len(es) < page {
			return v, v.End(), nil
		}
		after = es[len(es)-1].Seq
	}
}
