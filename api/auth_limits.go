package api

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

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
	// trustedAddressIdle is how long an address that signed in to an
	// account stays exempt from the account's limit (see loginGuard).
	trustedAddressIdle = refreshTokenTTL
)

// loginGuard keeps password logins from becoming a memory or CPU outage
// and from serving as a password-guessing oracle.
//
//   - hashing bounds the argon2id hashes computed at once (each allocates
//     about 19 MiB); a login waits up to hashSlotWait for a slot.
//   - addresses limits every login attempt per client address, tokens
//     every refresh and logout per client address (a separate budget, so
//     a busy UI refreshing tokens does not eat its own logins).
//   - accounts limits the failed logins of an account: an attempt spends
//     one event before its hash is computed, so a burst cannot outrun
//     the check; a successful login gives the account a full budget back.
//   - trusted holds the (account, address) pairs that signed in
//     successfully lately: those skip the account limit, so a stranger
//     who spends an account's budget from elsewhere locks out only
//     himself, not its owner at the owner's usual address. Entries are
//     made only by a correct password, so they cannot be flooded.
//
// Every check happens before any hashing: a refused attempt costs a map
// lookup.
type loginGuard struct {
	hashing   *semaphore.Weighted
	accounts  *keyedLimiter
	addresses *keyedLimiter
	tokens    *keyedLimiter
	now       func() time.Time

	trustMu sync.Mutex
	trusted *lruMap[struct{}]
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
		addresses: newKeyedLimiter(l.PerAddress, now),
		tokens:    newKeyedLimiter(l.PerAddress, now),
		now:       now,
		trusted:   newLRUMap[struct{}](trustedAddressIdle, maxLimiterKeys),
	}
}

// accountKey is the account a login names: its email as the store
// compares it.
func accountKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func trustKey(account, addr string) string { return account + "\x00" + addr }

// admitLogin checks the address's and the account's budgets, spending one
// event of each, or returns the 429 to answer.
func (g *loginGuard) admitLogin(addr, account string) error {
	if wait := g.addresses.take(addr); wait > 0 {
		return tooManyRequests("too many login attempts from this address", wait)
	}
	g.trustMu.Lock()
	trusted := g.trusted.has(trustKey(account, addr), g.now())
	g.trustMu.Unlock()
	if trusted {
		return nil
	}
	if wait := g.accounts.take(account); wait > 0 {
		return tooManyRequests("too many failed logins for this account", wait)
	}
	return nil
}

// loginSucceeded clears the account's failures and trusts the address
// with it.
func (g *loginGuard) loginSucceeded(addr, account string) {
	g.accounts.forget(account)
	g.trustMu.Lock()
	defer g.trustMu.Unlock()
	g.trusted.get(trustKey(account, addr), g.now(), func() struct{} { return struct{}{} })
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
		return nil, &retryLaterError{
			status: http.StatusServiceUnavailable,
			msg:    "too many logins in progress; retry later",
			after:  busyRetryAfter,
		}
	}
	return func() { g.hashing.Release(1) }, nil
}

func tooManyRequests(msg string, wait time.Duration) error {
	return &retryLaterError{status: http.StatusTooManyRequests, msg: msg + "; retry later", after: wait}
}

// clientAddress is the rate-limit key of the connection's peer: its IP,
// or for IPv6 its /64, since one host commonly holds a whole /64.
// X-Forwarded-For and the like are not trusted: anyone can write them,
// and honouring them would let a flood pick a fresh key per request.
// Behind a reverse proxy, every client shares the proxy's budget.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		prefix, _ := ip.Prefix(64)
		return prefix.String()
	}
	return ip.String()
}
