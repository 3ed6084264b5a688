package auth

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"
)

// Login limits beyond the configured ones.
const (
	// hashSlotWait is how long a login waits for a hashing slot before
	// it is turned away: long enough to ride out a burst, short enough
	// that a flood cannot pile up waiters for long.
	hashSlotWait = 5 * time.Second
	// busyRetryAfter is the Retry-After of a login turned away for want
	// of a slot.
	busyRetryAfter = 5 * time.Second
)

// loginGuard keeps password logins from becoming a memory or CPU outage
// and from serving as a password-guessing oracle.
//
//   - hashing bounds the argon2id hashes computed at once (each allocates
//     about 19 MiB); a login waits up to hashSlotWait for a slot.
//   - addresses limits every login attempt per client address, tokens
//     every refresh and logout per client address (a separate budget, so
//     a busy UI refreshing tokens does not eat its own logins).
//   - accounts limits the failed logins of an account from clients
//     without a device cookie, whatever their address (behind a reverse
//     proxy many clients share one): an attempt spends one event before
//     its hash is computed, so a burst cannot outrun the check; a
//     successful login gives the budget it spent back.
//   - devices limits, the same way, the failed logins of each client that
//     proves with a device cookie (devices.go) that it signed in to
//     the account before. Such a client is not judged by the account's
//     budget, so a stranger who spends it on purpose locks out only the
//     clients that never signed in, not the owner. A device whose own
//     budget is spent (its cookie stolen and tried) falls back to the
//     account's, as a client without a cookie.
//
// Every check happens before any hashing: a refused attempt costs a map
// lookup.
type loginGuard struct {
	hashing   *semaphore.Weighted
	accounts  *keyedLimiter
	devices   *keyedLimiter
	addresses *keyedLimiter
	tokens    *keyedLimiter
}

// withDefaults fills in the zero fields of l.
func (l LoginLimits) withDefaults() LoginLimits {
	if l.InFlight <= 0 {
		l.InFlight = runtime.NumCPU()
	}
	if l.PerAccount.Events <= 0 || l.PerAccount.Per <= 0 {
		l.PerAccount = Rate{Events: 10, Per: time.Minute}
	}
	if l.PerAddress.Events <= 0 || l.PerAddress.Per <= 0 {
		l.PerAddress = Rate{Events: 60, Per: time.Minute}
	}
	return l
}

func newLoginGuard(l LoginLimits, now func() time.Time) *loginGuard {
	l = l.withDefaults()
	return &loginGuard{
		hashing:   semaphore.NewWeighted(int64(l.InFlight)),
		accounts:  newKeyedLimiter(l.PerAccount, now),
		devices:   newKeyedLimiter(l.PerAccount, now),
		addresses: newKeyedLimiter(l.PerAddress, now),
		tokens:    newKeyedLimiter(l.PerAddress, now),
	}
}

// accountKey is the account a login names: its email as the store
// compares it.
func accountKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// loginAttempt is one password check admitted by the guard: for which
// account, from which device, and whose budget it spent.
type loginAttempt struct {
	account string
	// device is the id of the client's valid device cookie ("" = none);
	// byDevice says the attempt spent the device's budget, not the
	// account's.
	device   string
	byDevice bool
}

// admitLogin checks the address's budget and then the device's, or
// without a usable device the account's, spending one event of each it
// checks, or returns the 429 to answer.
func (g *loginGuard) admitLogin(addr, account, device string) (*loginAttempt, error) {
	if wait := g.addresses.take(addr); wait > 0 {
		return nil, tooManyRequests("too many login attempts from this address", wait)
	}
	at := &loginAttempt{account: account, device: device}
	if device != "" && g.devices.take(device) == 0 {
		at.byDevice = true
		return at, nil
	}
	if wait := g.accounts.take(account); wait > 0 {
		return nil, tooManyRequests("too many failed logins for this account", wait)
	}
	return at, nil
}

// loginSucceeded gives back the budget the attempt spent: only failures
// count.
func (g *loginGuard) loginSucceeded(at *loginAttempt) {
	if at.byDevice {
		g.devices.forget(at.device)
	} else {
		g.accounts.forget(at.account)
	}
}

// admitToken checks the address's budget for refresh and logout.
func (g *loginGuard) admitToken(addr string) error {
	if wait := g.tokens.take(addr); wait > 0 {
		return tooManyRequests("too many token requests from this address", wait)
	}
	return nil
}

// hashSlot waits for a hashing slot: up to hashSlotWait, then 503. The
// caller must call release once its hash is done.
func (g *loginGuard) hashSlot(ctx context.Context) (release func(), err error) {
	wait, cancel := context.WithTimeout(ctx, hashSlotWait)
	defer cancel()
	if err := g.hashing.Acquire(wait, 1); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the client gave up; nobody to answer
		}
		return nil, &httpx.RetryLater{
			Status: http.StatusServiceUnavailable,
			Msg:    "too many logins in progress; retry later",
			After:  busyRetryAfter,
		}
	}
	return func() { g.hashing.Release(1) }, nil
}

func tooManyRequests(msg string, wait time.Duration) error {
	return &httpx.RetryLater{Status: http.StatusTooManyRequests, Msg: msg + "; retry later", After: wait}
}

// clientAddress is the rate-limit key of the request's client: its
// address as c.RealIP() finds it (clientaddr.go; behind a trusted proxy,
// the address the proxy saw), IPv6 by its /64.
func clientAddress(c echo.Context) string { return rateKey(c.RealIP()) }
