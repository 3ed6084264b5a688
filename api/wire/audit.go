package wire

import "github.com/appliance-sh/appliance/audit"

// AuditPage is GET /api/audit's answer: entries oldest first, the chain's
// anchor and head when the page was read (so a client can verify what it
// pages through, see `appliance audit verify --server`), and the cursor
// of the next page (absent on the last).
type AuditPage struct {
	Entries []audit.Entry `json:"entries"`
	Anchor  audit.Head    `json:"anchor"`
	Head    audit.Head    `json:"head"`
	Next    *int64        `json:"next"`
}
