package auth

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/audit"
)

// viaKey marks an echo context built for an MCP tool call (SetVia).
const viaKey = "appliance.audit.via"

type via struct {
	source, addr string
}

// SetVia records that c is a call made on behalf of another request (an
// MCP tool call runs the API's handler in process): entries of c name
// source and that request's client address.
func SetVia(c echo.Context, source, clientAddress string) {
	c.Set(viaKey, via{source: source, addr: clientAddress})
}

// Entry is the audit entry of c's caller, what they do left to fill in:
// the user, or the API key's name with its owner, from the client
// address the API sees (c.RealIP: trusted_proxies honoured). Never a
// token or a key, only names.
func Entry(c echo.Context) audit.Entry {
	e := audit.Entry{Source: audit.SourceAnon, ClientAddress: c.RealIP()}
	if p := Caller(c); p != nil && p.User != nil {
		e.Actor = audit.Actor{ID: p.User.ID, Email: p.User.Email, Key: p.keyName}
		e.Source = audit.SourceUser
		if p.keyHash != "" {
			e.Source = audit.SourceAPIKey
		}
	}
	if v, ok := c.Get(viaKey).(via); ok {
		e.Source, e.ClientAddress = v.source, v.addr
	}
	return e
}

// Audited is c's request context carrying c's caller's entry for
// action on target: a store or the engine writes it with the change the
// call makes (audit.WithEntry). The engine fills in action and target of
// its own commands.
func Audited(c echo.Context, action, target string) context.Context {
	e := Entry(c)
	e.Action, e.Target = action, target
	return audit.WithEntry(c.Request().Context(), e)
}

// record queues an entry that records no change (a failed sign-in) for
// the next commit; without a queue (no audit trail) it is dropped.
func (a *Service) record(e audit.Entry) {
	if a.cfg.Audit == nil {
		return
	}
	e.At = a.now()
	a.cfg.Audit.Push(e)
}

// auditedAs is audited for a caller the request does not authenticate
// (a sign-out names only a refresh token): the store fills in who.
func (a *Service) auditedAs(c echo.Context, source, action string) context.Context {
	e := Entry(c)
	e.At, e.Source, e.Action, e.Outcome = a.now(), source, action, audit.OK
	return audit.WithEntry(c.Request().Context(), e)
}

// audited is Audited at this service's clock, with a detail (Reason).
func (a *Service) audited(c echo.Context, action, target, detail string) context.Context {
	e := Entry(c)
	e.At, e.Action, e.Target, e.Outcome, e.Reason = a.now(), action, target, audit.OK, detail
	return audit.WithEntry(c.Request().Context(), e)
}
