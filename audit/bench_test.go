package audit_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/audit"
)

// BenchmarkAppend is the chain's cost per entry: cleaning, the canonical
// encoding, the HMAC and the stored JSON.
func BenchmarkAppend(b *testing.B) {
	var head audit.Head
	for b.Loop() {
		e := audit.Entry{At: time.Now(), Actor: audit.Actor{ID: "9b2f3c1e-5d6a-4b7c-8e9f-0a1b2c3d4e5f", Email: "ann@example.com"},
			Source: audit.SourceUser, Action: audit.JobExecute, Target: "job/0b2f3c1e-5d6a-4b7c-8e9f-0a1b2c3d4e5f", Outcome: audit.OK, ClientAddress: "10.1.2.3"}
		head = audit.Append(key, head, &e)
		if _, err := json.Marshal(&e); err != nil {
			b.Fatal(err)
		}
	}
}
