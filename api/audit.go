package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/audit"
)

// AuditLog is what the API reads of the audit trail; both stores have it.
type AuditLog interface {
	AuditHeads(ctx context.Context) (anchor, head audit.Head, err error)
	AuditEntries(ctx context.Context, f audit.Filter) ([]audit.Entry, error)
}

// Audit page sizes.
const (
	defaultAuditPage = 100
	maxAuditPage     = 1000
)

// denied records a refused request (403): the /metrics counter by route,
// and an audit entry that rides the next commit (the queue is bounded,
// so a flood of refusals costs neither memory nor commits).
func (s *server) denied(c echo.Context, reason string) {
	route := c.Request().Method + " " + c.Path()
	if s.cfg.OnDenied != nil {
		s.cfg.OnDenied(route)
	}
	if s.cfg.AuditQueue == nil {
		return
	}
	e := auth.Entry(c)
	e.At, e.Action, e.Outcome, e.Reason = s.now(), audit.RequestDenied, audit.Denied, reason
	e.Target = c.Request().Method + " " + c.Request().URL.Path
	s.cfg.AuditQueue.Push(e)
}

func (s *server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// listAudit is GET /api/audit: admins only (a scoped key needs admin).
func (s *server) listAudit(c echo.Context) error {
	if s.cfg.Audit == nil {
		return httpx.NotFound("the audit trail (this server keeps none)")
	}
	if p := auth.Caller(c); s.auth != nil && (p == nil || !p.User.IsAdmin) {
		return forbidden("the audit trail is for admins")
	}
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	anchor, head, err := s.cfg.Audit.AuditHeads(ctx)
	if err != nil {
		return err
	}
	want := f.Limit
	f.Limit++ // one more says whether a next page exists
	entries, err := s.cfg.Audit.AuditEntries(ctx, f)
	if err != nil {
		return err
	}
	page := wire.AuditPage{Entries: entries, Anchor: anchor, Head: head}
	if len(entries) > want {
		page.Entries = entries[:want]
		next := page.Entries[want-1].Seq
		page.Next = &next
	}
	if page.Entries == nil {
		page.Entries = []audit.Entry{}
	}
	return c.JSON(http.StatusOK, page)
}

func auditFilter(c echo.Context) (audit.Filter, error) {
	q := c.QueryParams()
	f := audit.Filter{Actor: q.Get("actor"), Action: q.Get("action"), Target: q.Get("target"), Limit: defaultAuditPage}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, httpx.BadRequest("%s: want an RFC 3339 time (2025-01-02T15:04:05Z), got %q", t.name, v)
			}
			*t.to = at
		}
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, httpx.BadRequest("cursor: want the next field of the page before, got %q", v)
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			return f, httpx.BadRequest("limit: want 1 to %d, got %q", maxAuditPage, v)
		}
		f.Limit = n
	}
	return f, nil
}
