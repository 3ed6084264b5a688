package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/audit"
)

// typicalEntry is an execute by a user through an API key, with uuids
// as the server makes them.
func typicalEntry(i int) audit.Entry {
	return audit.Entry{At: time.Now(), Actor: audit.Actor{ID: "9b2f3c1e-5d6a-4b7c-8e9f-0a1b2c3d4e5f", Email: "ann.lee@example.com", Key: "ci-deploy"},
		Source: audit.SourceAPIKey, Action: audit.JobExecute, Target: fmt.Sprintf("job/0b2f3c1e-5d6a-4b7c-8e9f-%012d", i),
		Outcome: audit.OK, ClientAddress: "10.20.30.40"}
}

// BenchmarkAuditBytesPerEntry appends 20,000 typical entries, 100 a
// commit, and reports what each adds to the bbolt file.
func BenchmarkAuditBytesPerEntry(b *testing.B) {
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "appliance.db")
		db, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		db.SetAuditKey(audit.Key("bench key 0123456789abcdef"))
		before := fileSize(b, path)
		const n = 20000
		for i := 0; i < n; i += 100 {
			batch := make([]audit.Entry, 100)
			for k := range batch {
				batch[k] = typicalEntry(i + k)
			}
			if err := db.AppendAudit(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		var inuse int
		var jsonBytes int
		if err := db.bolt.View(func(tx *bolt.Tx) error {
			st := tx.Bucket(bucketAudit).Stats()
			inuse = st.LeafInuse + st.BranchInuse
			return tx.Bucket(bucketAudit).ForEach(func(_, v []byte) error { jsonBytes += len(v); return nil })
		}); err != nil {
			b.Fatal(err)
		}
		db.Close()
		// The file grows by whole pages and ahead of need (bbolt's mmap
		// steps); what the entries take in their pages is inuse.
		b.ReportMetric(float64(inuse)/n, "bytes/entry")
		b.ReportMetric(float64(jsonBytes)/n, "json-bytes/entry")
		b.ReportMetric(float64(fileSize(b, path)-before)/n, "file-bytes/entry")
	}
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
