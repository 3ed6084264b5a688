package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// keys is how many keys the limiter holds, idle ones forgotten first.
func (k *keyedLimiter) keys() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byKey.evictIdle(k.now())
	return k.byKey.order.Len()
}

// manualClock is a clock moved by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time          { return c.t }
func (c *manualClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestKeyedLimiterSpendsABurstThenSaysWhenToRetry(t *testing.T) {
	clock := &manualClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	lim := newKeyedLimiter(Rate{Events: 10, Per: time.Minute}, clock.now)
	for i := range 10 {
		if wait := lim.take("a"); wait != 0 {
			t.Fatalf("event %d: wait %v, want none within the burst", i+1, wait)
		}
	}
	if wait := lim.take("a"); wait != 6*time.Second {
		t.Fatalf("11th event: wait %v, want 6s (one event per 6s refills)", wait)
	}
	// A refusal spends nothing: the same wait again, and another key is
	// untouched.
	if wait := lim.take("a"); wait != 6*time.Second {
		t.Fatalf("refused event spent budget: wait %v", wait)
	}
	if wait := lim.take("b"); wait != 0 {
		t.Fatalf("another key waits %v", wait)
	}
	clock.advance(6 * time.Second)
	if wait := lim.take("a"); wait != 0 {
		t.Fatalf("after the wait: %v", wait)
	}
	if wait := lim.take("a"); wait == 0 {
		t.Fatal("one refill allowed two events")
	}
	lim.forget("a")
	if wait := lim.take("a"); wait != 0 {
		t.Fatalf("forgotten key waits %v", wait)
	}
}

func TestKeyedLimiterAdmitsNoMoreThanItsBurstUnderConcurrency(t *testing.T) {
	frozen := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	g := newLoginGuard(LoginLimits{InFlight: 2, PerAccount: Rate{Events: 10, Per: time.Minute}, PerAddress: Rate{Events: 1000, Per: time.Minute}},
		func() time.Time { return frozen })
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.admitLogin(fmt.Sprintf("192.0.2.%d", i), "ada@example.com", ""); err == nil {
				admitted.Add(1)
			}
			g.admitToken("192.0.2.1")
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 10 {
		t.Fatalf("admitted %d concurrent attempts on one account, want its burst of 10", n)
	}
}

func TestKeyedLimiterForgetsIdleKeys(t *testing.T) {
	clock := &manualClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	lim := newKeyedLimiter(Rate{Events: 10, Per: time.Minute}, clock.now)
	for i := range 1000 {
		lim.take(fmt.Sprintf("user%d@example.com", i))
	}
	if n := lim.keys(); n != 1000 {
		t.Fatalf("keys = %d, want 1000", n)
	}
	clock.advance(30 * time.Second)
	lim.take("late@example.com")
	clock.advance(30 * time.Second)
	// The first thousand have refilled completely and are gone; the late
	// one is half-way and stays.
	if n := lim.keys(); n != 1 {
		t.Fatalf("keys after a minute idle = %d, want 1", n)
	}
}

func TestKeyedLimiterHoldsAtMostMaxKeys(t *testing.T) {
	clock := &manualClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	lim := newKeyedLimiter(Rate{Events: 1, Per: time.Hour}, clock.now)
	// A flood of distinct keys within the idle time, some of them huge.
	for i := range maxLimiterKeys + 5000 {
		key := fmt.Sprintf("user%d@example.com", i)
		if i%1000 == 0 {
			key = strings.Repeat("x", 1<<20) + key
		}
		lim.take(key)
	}
	if n := lim.keys(); n != maxLimiterKeys {
		t.Fatalf("keys = %d, want the bound %d", n, maxLimiterKeys)
	}
	for _, el := range lim.byKey.byKey {
		if k := el.Value.(*lruEntry[*rate.Limiter]).key; len(k) > 64 {
			t.Fatalf("a key of %d bytes is kept whole", len(k))
		}
	}
	// The most recent keys are the ones kept.
	if wait := lim.take(fmt.Sprintf("user%d@example.com", maxLimiterKeys+4999)); wait == 0 {
		t.Fatal("the most recent key was forgotten")
	}
}

func TestHashSlotWaitsForTheRequestContext(t *testing.T) {
	g := newLoginGuard(LoginLimits{InFlight: 1}, time.Now)
	release, err := g.hashSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = g.hashSlot(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting with a cancelled request: %v, want its context error", err)
	}
	if took := time.Since(start); took > hashSlotWait/2 {
		t.Fatalf("the wait ignored the request's end: took %v", took)
	}
}

func TestClientAddressIgnoresForwardedHeadersOfUntrustedPeers(t *testing.T) {
	for _, c := range []struct{ remote, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5555", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:5555", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:80", "2001:db8:1:2::/64"},
	} {
		r, _ := http.NewRequest("POST", "/api/auth/login", nil)
		r.RemoteAddr = c.remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-Real-IP", "203.0.113.9")
		r.Header.Set("Forwarded", "for=203.0.113.9")
		// 10.0.0.0/8 is a trusted proxy, but the peer is not one of them.
		a := clientAddrs{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
		if got := rateKey(a.extract(r)); got != c.want {
			t.Errorf("client of %s = %q, want %q", c.remote, got, c.want)
		}
	}
}

// TestClientAddressBehindTrustedProxies reads the forwarding headers right
// to left past the trusted hops, as the proxies wrote them.
func TestClientAddressBehindTrustedProxies(t *testing.T) {
	a := clientAddrs{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ff::/48")}}
	for _, c := range []struct {
		name, remote string
		header       http.Header
		want         string
	}{
		{"no header: the proxy itself", "10.0.0.1:80", nil, "10.0.0.1"},
		{"one hop", "10.0.0.1:80", http.Header{"X-Forwarded-For": {"192.0.2.7"}}, "192.0.2.7"},
		{"a client's own entries are left of the first untrusted hop", "10.0.0.1:80",
			http.Header{"X-Forwarded-For": {"198.51.100.1, 10.9.9.9, 192.0.2.7, 10.0.0.2"}}, "192.0.2.7"},
		{"several header lines are one list", "10.0.0.1:80",
			http.Header{"X-Forwarded-For": {"198.51.100.1", "192.0.2.7, 10.0.0.2"}}, "192.0.2.7"},
		{"every hop trusted: the farthest", "10.0.0.1:80", http.Header{"X-Forwarded-For": {"10.1.1.1, 10.0.0.2"}}, "10.1.1.1"},
		{"garbage stops at the last trusted hop", "10.0.0.1:80", http.Header{"X-Forwarded-For": {"192.0.2.7, nonsense, 10.0.0.2"}}, "10.0.0.2"},
		{"a port is dropped", "10.0.0.1:80", http.Header{"X-Forwarded-For": {"192.0.2.7:4711"}}, "192.0.2.7"},
		{"Forwarded, right to left", "10.0.0.1:80",
			http.Header{"Forwarded": {`for=198.51.100.1, for=192.0.2.7;proto=https;by=10.0.0.2, For="10.0.0.3:8080"`}}, "192.0.2.7"},
		{"Forwarded IPv6 in quotes and brackets", "[2001:db8:ff::1]:80",
			http.Header{"Forwarded": {`for="[2001:db8:1:2::9]:4711"`}}, "2001:db8:1:2::/64"},
		{"Forwarded unknown stops the walk", "10.0.0.1:80", http.Header{"Forwarded": {"for=192.0.2.7, for=unknown"}}, "10.0.0.1"},
		{"Forwarded element without for=", "10.0.0.1:80", http.Header{"Forwarded": {"for=192.0.2.7, proto=https"}}, "10.0.0.1"},
		{"both headers agreeing", "10.0.0.1:80",
			http.Header{"X-Forwarded-For": {"192.0.2.7"}, "Forwarded": {"for=192.0.2.7"}}, "192.0.2.7"},
		{"both headers disagreeing: the proxy", "10.0.0.1:80",
			http.Header{"X-Forwarded-For": {"192.0.2.7"}, "Forwarded": {"for=198.51.100.1"}}, "10.0.0.1"},
	} {
		r, _ := http.NewRequest("POST", "/api/auth/login", nil)
		r.RemoteAddr = c.remote
		for k, v := range c.header {
			r.Header[k] = v
		}
		if got := rateKey(a.extract(r)); got != c.want {
			t.Errorf("%s: client = %q, want %q", c.name, got, c.want)
		}
	}
}
