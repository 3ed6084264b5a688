// Package audit is the audit trail's model: the entry every store writes
// in the same commit as the change it records, its canonical encoding,
// the keyed chain (HMAC-SHA-256) that makes an edit, a deletion, a
// reordering or a truncation show, and the check that finds the first
// broken entry. Like accounts, it is a leaf every room may import: it
// knows no HTTP, no database and no engine.
package audit

import (
	"context"
	"time"
)

// Sources: who, in kind, an entry's actor is.
const (
	SourceUser    = "user"    // a person signed in (access token or cookie)
	SourceAPIKey  = "api_key" // an API key: Actor.Key names it, Actor.ID/Email its owner
	SourceWebhook = "webhook" // a trigger's webhook: Actor.ID is workspace/trigger
	SourceTrigger = "trigger" // a cron trigger or an event source: Actor.ID is workspace/trigger
	SourceMCP     = "mcp"     // the MCP endpoint, for a user or a key (Actor as for them)
	SourceSystem  = "system"  // the server itself (a config reload by a signal, a file watch)
	SourceAnon    = "anonymous"
)

// Outcomes.
const (
	OK     = "ok"
	Denied = "denied" // refused by the ACL or a key's scopes (403)
	Failed = "failed" // attempted and failed (a wrong password); Reason says why
)

// Actions recorded.
const (
	SignIn        = "auth.sign_in"
	SignOut       = "auth.sign_out"
	KeyCreate     = "api_key.create"
	KeyRevoke     = "api_key.revoke"
	UserCreate    = "user.create"
	UserUpdate    = "user.update" // admin status, groups
	UserPassword  = "user.password"
	UserDelete    = "user.delete"
	JobExecute    = "job.execute"
	JobCancel     = "job.cancel"
	JobRerun      = "job.rerun"
	ApprovalGrant = "approval.approve"
	ApprovalDeny  = "approval.reject"
	ConfigReload  = "config.reload"
	RequestDenied = "request.denied"
)

// Actor is who acted. Fields that do not apply are empty.
type Actor struct {
	// ID is the user's id (for a user, a key's owner, MCP), or
	// workspace/trigger for a webhook or a trigger.
	ID string `json:"id,omitempty"`
	// Email is the user's, or the key owner's.
	Email string `json:"email,omitempty"`
	// Key is the API key's name (never the key).
	Key string `json:"key,omitempty"`
}

// Entry is one line of the trail. Seq and MAC are the store's: it
// numbers and signs entries as it appends them, inside the transaction
// that writes them. Nothing here is ever a secret: no password, no token,
// no key, only names.
type Entry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Actor   Actor     `json:"actor"`
	Source  string    `json:"source"`
	Action  string    `json:"action"`
	Target  string    `json:"target,omitempty"` // job/ID, task/WS/TASK, user/ID, api_key/PREFIX, route
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason,omitempty"`
	// ClientAddress is the caller's address as the API sees it
	// (trusted_proxies honoured); empty for the server's own actions.
	ClientAddress string `json:"client_address,omitempty"`
	// Dropped counts the denied or failed requests the bounded queue
	// dropped before this entry was queued (see Queue).
	Dropped int64  `json:"dropped,omitempty"`
	MAC     string `json:"mac"`
}

// Head is a point of the chain: an entry's sequence number and MAC. The
// zero Head is the start of an empty chain.
type Head struct {
	Seq int64  `json:"seq"`
	MAC string `json:"mac"`
}

// Head returns the entry as a point of the chain.
func (e *Entry) Head() Head { return Head{Seq: e.Seq, MAC: e.MAC} }

type ctxKey struct{}

// WithEntry returns a context that carries an entry to write with the
// change the call makes: the store (an account change) or the engine
// (execute, cancel, re-run, approval) appends it in the same transaction,
// so an acknowledged change has its entry and an entry never describes a
// change that did not commit. It rides the context so every write of the
// ports can carry one without a second signature each.
func WithEntry(ctx context.Context, e Entry) context.Context {
	return context.WithValue(ctx, ctxKey{}, &e)
}

// WithoutEntry returns ctx carrying no entry: for a store method that
// writes the entry itself, once it knows what it lacks (see ForUser).
func WithoutEntry(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, (*Entry)(nil))
}

// ForUser completes an entry whose user only the change itself knows (a
// sign-out names a refresh token, whose user the store reads): the
// actor, when the entry has none, and the target.
func ForUser(e Entry, userID string) Entry {
	if e.Actor.ID == "" && e.Actor.Email == "" {
		e.Actor.ID = userID
	}
	e.Target = "user/" + userID
	return e
}

// FromContext returns the entry WithEntry put there, if any.
func FromContext(ctx context.Context) (Entry, bool) {
	e, ok := ctx.Value(ctxKey{}).(*Entry)
	if !ok || e == nil {
		return Entry{}, false
	}
	return *e, true
}

// Filter selects entries, oldest first. Every field set must hold.
type Filter struct {
	Actor  string // matches Actor.ID, Actor.Email or Actor.Key exactly
	Action string // exact, or a prefix ending in "." ("job.")
	Target string // exact
	Since  time.Time
	Until  time.Time // exclusive
	After  int64     // cursor: entries with Seq > After
	Limit  int
}

// Match says whether e passes f's filters (not its cursor or limit).
func (f *Filter) Match(e *Entry) bool {
	if f.Actor != "" && f.Actor != e.Actor.ID && f.Actor != e.Actor.Email && f.Actor != e.Actor.Key {
		return false
	}
	if f.Action != "" && f.Action != e.Action {
		if f.Action[len(f.Action)-1] != '.' || len(e.Action) < len(f.Action) || e.Action[:len(f.Action)] != f.Action {
			return false
		}
	}
	if f.Target != "" && f.Target != e.Target {
		return false
	}
	if !f.Since.IsZero() && e.At.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !e.At.Before(f.Until) {
		return false
	}
	return true
}

// Store is the trail's storage: both stores implement it. Appends that
// record a change go with the change (engine.Batch.Audit, WithEntry on an
// account write); AppendAudit is for entries that record none.
type Store interface {
	AppendAudit(ctx context.Context, entries []Entry) error
	// AuditHeads returns the chain's anchor (zero, or the last entry
	// retention dropped) and its head (the newest entry).
	AuditHeads(ctx context.Context) (anchor, head Head, err error)
	AuditEntries(ctx context.Context, f Filter) ([]Entry, error)
	// TrimAudit drops entries older than before, from the front only,
	// keeping the last one dropped as the anchor.
	TrimAudit(ctx context.Context, before time.Time) (int, error)
	// RestoreAudit writes entries verbatim after anchor (an import).
	RestoreAudit(ctx context.Context, anchor Head, entries []Entry) error
}
