package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/auth"
)

const peerSecret = "peer-secret-for-tests"

// withHA makes the server a replica: lead says whether it leads, and
// leader where the leader is when it does not.
func withHA(self string, lead *atomic.Bool, leader *atomic.Value) fixtureOption {
	return func(c *fixtureConfig) {
		c.HA = &api.HA{PeerSecret: peerSecret, Self: self, Leader: func() (bool, string) {
			if lead.Load() {
				return true, ""
			}
			url, _ := leader.Load().(string)
			return false, url
		}}
	}
}

// pair is a leading replica and a follower pointing at it, each a real
// server with its own engine (the follower's is never asked).
type pair struct {
	leader, follower *fixture
	leads            *atomic.Bool
	leaderURL        *atomic.Value
}

func newPair(t *testing.T, leaderOpts ...fixtureOption) *pair {
	p := &pair{leads: &atomic.Bool{}, leaderURL: &atomic.Value{}}
	yes := &atomic.Bool{}
	yes.Store(true)
	p.leader = newFixture(t, append(leaderOpts, withHA("leader", yes, &atomic.Value{}))...)
	p.leaderURL.Store(p.leader.url)
	p.follower = newFixture(t, withHA("follower", p.leads, p.leaderURL))
	return p
}

// A follower forwards what the leader answers: an execute made through
// it is a job of the leader's engine, its reads and streams (SSE and the
// WebSocket log stream) come from the leader, and /readyz says it follows.
func TestFollowerForwardsToTheLeader(t *testing.T) {
	p := newPair(t)
	f := p.follower
	id := f.execute("via follower")
	if _, _, err := p.leader.eng.Job(context.Background(), id); err != nil {
		t.Fatalf("job made through the follower is not the leader's: %v", err)
	}
	if _, _, err := f.eng.Job(context.Background(), id); err == nil {
		t.Fatal("the follower's own engine made the job")
	}
	got := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	if got["job_id"] != id {
		t.Fatalf("job read through the follower: %v", got)
	}
	// A worker through the follower: /worker is forwarded too, and the
	// log stream the follower upgrades carries the leader's lines.
	w := f.register("remote")
	f.claimStep(w, id, "say")
	f.worker("POST", "/worker/jobs/"+id+"/steps/say/start", map[string]any{"worker_id": w}).expect(200)
	v := f.watch(id)
	f.pushLogs(w, id, "say", "a line through the follower")
	for frame := v.next(); !strings.Contains(frame, "a line through the follower"); frame = v.next() {
	}
	events := openEvents(t, f.url, "")
	id2 := f.execute("second")
	eventually(t, "the feed through the follower shows the new job", func() bool {
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return false
				}
				if job, _ := ev.data["job_id"].(string); job == id2 {
					return true
				}
			default:
				return false
			}
		}
	})

	r := f.api("GET", "/readyz", nil).expect(503).object()
	if r["status"] != "follower" || r["leader"] != p.leader.url {
		t.Fatalf("follower's /readyz: %v", r)
	}
	p.leader.api("GET", "/readyz", nil).expect(200)
	cfg := f.api("GET", "/api/config", nil).expect(200).object()
	ha, _ := cfg["ha"].(map[string]any)
	if ha["replica"] != "follower" || ha["leader"] != p.leader.url || ha["leading"] != false {
		t.Fatalf("follower's /api/config ha: %v", cfg["ha"])
	}
}

// The follower runs its own Host check before forwarding: a name that is
// not the server's is refused there, never reaching the leader.
func TestFollowerChecksHostBeforeForwarding(t *testing.T) {
	p := newPair(t)
	p.follower.do("POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{},
		map[string]string{"Host": "evil.example:80"}).expectError(421, "evil.example")
	jobs := p.leader.api("GET", "/api/jobs", nil).expect(200).object()
	if n, _ := jobs["total"].(float64); n != 0 {
		t.Fatalf("a refused request reached the leader: %v jobs", n)
	}
}

// While no replica leads, a follower answers 503 with Retry-After; a
// leader that does not answer is a 503 with Retry-After too.
func TestNoLeaderIsRetryLater(t *testing.T) {
	p := newPair(t)
	p.leaderURL.Store("")
	r := p.follower.api("GET", "/api/jobs", nil)
	r.expectRetryLater(http.StatusServiceUnavailable, "1")
	if !strings.Contains(r.errorMessage(), "no replica leads") {
		t.Fatalf("message %q", r.errorMessage())
	}
	r = p.follower.api("GET", "/readyz", nil).expect(503)
	if r.header.Get("Retry-After") == "" || r.object()["leader"] != "" {
		t.Fatalf("readyz during a failover: %v %v", r.header, r.object())
	}
	p.leaderURL.Store("http://127.0.0.1:1") // nobody listens there
	p.follower.api("GET", "/api/jobs", nil).expectRetryLater(http.StatusServiceUnavailable, "1")
	// A request a peer forwards to a replica that does not lead is not
	// forwarded again.
	p.leaderURL.Store(p.follower.url)
	p.follower.do("GET", "/api/jobs", nil, map[string]string{"X-Appliance-Peer": peerSecret}).expectRetryLater(http.StatusServiceUnavailable, "1")
}

// An execute with an Idempotency-Key makes one job however often it is
// sent; another key makes another.
func TestExecuteIdempotencyKey(t *testing.T) {
	f := newFixture(t)
	exec := func(key string) string {
		m := f.do("POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "k"}},
			map[string]string{"Idempotency-Key": key}).expect(200).object()
		return m["job_id"].(string)
	}
	a := exec("key-1")
	if b := exec("key-1"); b != a {
		t.Fatalf("same key made two jobs: %s, %s", a, b)
	}
	if c := exec("key-2"); c == a {
		t.Fatal("another key answered the first job")
	}
	f.do("POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{},
		map[string]string{"Idempotency-Key": strings.Repeat("k", 201)}).expectError(400, "idempotency key")
}

// The leader takes the client address a follower passes only from a
// peer carrying the secret: behind the follower two clients have their
// own login budgets; a client forging the header directly gets none.
func TestLeaderTakesClientAddressOnlyFromPeers(t *testing.T) {
	yes := &atomic.Bool{}
	yes.Store(true)
	leader := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 100, Per: time.Minute},
		PerAddress: auth.Rate{Events: 2, Per: time.Minute},
	}, withHA("leader", yes, &atomic.Value{}))
	leaderURL := &atomic.Value{}
	leaderURL.Store(leader.url)
	follower := newFixture(t, withHA("follower", &atomic.Bool{}, leaderURL))
	viaFollower := leader.via(follower.url)
	a, b := viaFollower.from("127.0.0.2"), viaFollower.from("127.0.0.3")
	for range 2 {
		a.loginAs("nobody@example.com", "guess", nil).expect(401)
	}
	a.loginAs("nobody@example.com", "guess", nil).expectError(429, "from this address")
	b.loginAs("nobody@example.com", "guess", nil).expect(401) // its own budget

	// Directly, a forged client header without the secret is not read.
	direct := leader.from("127.0.0.4")
	for i := range 2 {
		direct.loginAs("nobody@example.com", "guess", map[string]string{"X-Appliance-Client": fmt.Sprintf("198.51.100.%d", i)}).expect(401)
	}
	direct.loginAs("nobody@example.com", "guess", map[string]string{
		"X-Appliance-Client": "198.51.100.9", "X-Appliance-Peer": "wrong",
	}).expectError(429, "from this address")
}
