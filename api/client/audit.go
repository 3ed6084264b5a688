package client

import (
	"context"
	"net/url"

	"github.com/appliance-sh/appliance/api/wire"
)

// Audit reads one page of the audit trail (admins): q holds the filters
// (actor, action, target, since, until), cursor and limit.
func (c *Client) Audit(ctx context.Context, q url.Values) (*wire.AuditPage, error) {
	path := "/api/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page wire.AuditPage
	if _, err := c.Get(ctx, path, &page); err != nil {
		return nil, err
	}
	return &page, nil
}
