package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// BenchmarkAuditBytesPerEntry appends 20,000 typical entries, 100 a
// commit, and reports what each takes in the table with its index and
// TOAST (pg_total_relation_size, after VACUUM).
func BenchmarkAuditBytesPerEntry(b *testing.B) {
	for b.Loop() {
		dsn := pgtest.DSN(b)
		db := open(b, dsn)
		db.SetAuditKey(audit.Key("bench key 0123456789abcdef"))
		ctx := context.Background()
		const n = 20000
		for i := 0; i < n; i += 100 {
			batch := make([]audit.Entry, 100)
			for k := range batch {
				batch[k] = audit.Entry{At: time.Now(), Actor: audit.Actor{ID: "9b2f3c1e-5d6a-4b7c-8e9f-0a1b2c3d4e5f", Email: "ann.lee@example.com", Key: "ci-deploy"},
					Source: audit.SourceAPIKey, Action: audit.JobExecute, Target: fmt.Sprintf("job/0b2f3c1e-5d6a-4b7c-8e9f-%012d", i+k),
					Outcome: audit.OK, ClientAddress: "10.20.30.40"}
			}
			if err := db.AppendAudit(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `VACUUM audit_entries`); err != nil {
			b.Fatal(err)
		}
		// What makes the total up: the table (rows, their headers and
		// pages' slack), its indexes, and the rows' data alone.
		var size, table, indexes int64
		var row, rec float64
		err = conn.QueryRow(ctx, `SELECT pg_total_relation_size('audit_entries'), pg_table_size('audit_entries'),
			pg_indexes_size('audit_entries'), (SELECT avg(pg_column_size(a.*)) FROM audit_entries a),
			(SELECT avg(pg_column_size(rec)) FROM audit_entries)`).Scan(&size, &table, &indexes, &row, &rec)
		if err != nil {
			b.Fatal(err)
		}
		conn.Close(ctx)
		b.ReportMetric(float64(size)/n, "bytes/entry")
		b.ReportMetric(float64(table)/n, "table-bytes/entry")
		b.ReportMetric(float64(indexes)/n, "index-bytes/entry")
		b.ReportMetric(row, "row-bytes")
		b.ReportMetric(rec, "rec-bytes")
	}
}
