package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/accounts"
)

// promptly is how long a revocation may take to reach an open stream. The
// fixtures keep the periodic re-check at its 30 s default unless a test
// says otherwise, so an end within this proves the at-once path.
const promptly = 5 * time.Second

// ownACL gives the fixture an ACL of its own (testACL's rules), so a test
// may reload it without touching the others'.
func ownACL(acl **accounts.ACL) fixtureOption {
	return func(c *fixtureConfig) {
		*acl = &accounts.ACL{Default: testACL.Default, Rules: testACL.Rules}
		c.ACL = *acl
	}
}

// newKey creates an API key with the access token and returns the key
// and its prefix.
func (f *authFixture) newKey(access string) (key, prefix string) {
	f.t.Helper()
	m := f.as(access, "POST", "/api/auth/api-keys", map[string]any{"name": "ci"}).expect(200).object()
	return m["key"].(string), m["prefix"].(string)
}

// expectRevoked reads the stream up to `event: revoked` (pings and job
// events may come before it) and checks its status and that the stream
// then ends; it fails when that takes longer than promptly.
func expectRevoked(t *testing.T, events <-chan sseEvent, status float64, reason string) {
	t.Helper()
	deadline := time.After(promptly)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended without a revoked event")
			}
			if ev.name != "revoked" {
				continue
			}
			if ev.data["status"] != status || !strings.Contains(ev.data["reason"].(string), reason) {
				t.Fatalf("revoked %v; want status %v and a reason saying %q", ev.data, status, reason)
			}
			select {
			case ev, ok := <-events:
				if ok {
					t.Fatalf("after revoked the stream sent %s %v", ev.name, ev.data)
				}
			case <-time.After(promptly):
				t.Fatal("the stream stayed open after revoked")
			}
			return
		case <-deadline:
			t.Fatalf("no revoked event within %v", promptly)
		}
	}
}

// expectClose waits for the log stream to close and checks its code.
func (v *viewer) expectClose(code websocket.StatusCode, reason string) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), promptly)
	defer cancel()
	for {
		_, _, err := v.conn.Read(ctx)
		if err == nil {
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			v.t.Fatalf("the log stream did not close within %v", promptly)
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Reason, reason) {
			v.t.Fatalf("log stream ended with %v; want close %d saying %q", err, code, reason)
		}
		return
	}
}

// await reads frames up to one holding text (the server's own lines, such
// as "no worker is active", may come first); a close fails the test.
func (v *viewer) await(text string) {
	v.t.Helper()
	for !strings.Contains(v.next(), text) {
	}
}

// An admin's password reset ends everything the user held: their logins
// (access and refresh tokens), their API keys, and the event stream they
// follow with a key.
func TestAdminPasswordResetRevokesKeysLoginsAndStreams(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("admin@example.com", "pw", true)
	bobID := f.addUser("bob@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	bobAccess, bobRefresh := f.login("bob@example.com", "pw")
	key, _ := f.newKey(bobAccess)
	events := openEvents(t, f.url, key)

	f.as(admin, "PUT", "/api/users/"+bobID+"/password", map[string]any{"password": "a fresh password"}).expect(200)
	expectRevoked(t, events, 401, "api key was revoked")
	f.as(key, "GET", "/api/auth/me", nil).expect(401)
	f.as(bobAccess, "GET", "/api/auth/me", nil).expect(401)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": bobRefresh}).expect(401)
	bobAgain, _ := f.login("bob@example.com", "a fresh password")
	if keys := f.as(bobAgain, "GET", "/api/auth/api-keys", nil).expect(200).array(); len(keys) != 0 {
		t.Fatalf("after the reset bob still has keys %v", keys)
	}
}

// Deleting a user ends their open streams at once, whatever credential
// opened them: an API key's event stream and an access token's log
// stream.
func TestDeleteUserEndsTheirOpenStreams(t *testing.T) {
	f := newACLFixture(t)
	admin := f.tokens[roleAdmin]
	key, _ := f.newKey(f.tokens[roleView])
	job := f.run("hello")
	events := openEvents(t, f.url, key)
	logs := f.watchFrom(job, "token="+f.tokens[roleView])

	f.as(admin, "DELETE", "/api/users/"+f.ids[roleView], nil).expect(200)
	expectRevoked(t, events, 401, "")
	logs.expectClose(4401, "")
	f.as(key, "GET", "/api/auth/me", nil).expect(401)
}

// A user changing their own password revokes their API keys unless they
// say revoke_api_keys: false; the login making the change goes on.
func TestOwnPasswordChangeRevokesKeysUnlessAskedNotTo(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("bob@example.com", "old password!", false)
	access, _ := f.login("bob@example.com", "old password!")
	key, _ := f.newKey(access)
	events := openEvents(t, f.url, key)

	f.as(access, "PUT", "/api/auth/me/password", map[string]any{"current_password": "old password!", "password": "second password"}).expect(200)
	expectRevoked(t, events, 401, "api key was revoked")
	f.as(key, "GET", "/api/auth/me", nil).expect(401)
	f.as(access, "GET", "/api/auth/me", nil).expect(200)

	kept, _ := f.newKey(access)
	f.as(access, "PUT", "/api/auth/me/password", map[string]any{
		"current_password": "second password", "password": "third password", "revoke_api_keys": false,
	}).expect(200)
	f.as(kept, "GET", "/api/auth/me", nil).expect(200)
	f.as(access, "PUT", "/api/auth/me/password", map[string]any{
		"current_password": "third password", "password": "fourth password", "revoke_api_keys": "no",
	}).expect(400)
}

// Revoking the API key an event stream was opened with ends it at once
// with `event: revoked`, long before the 30 s re-check.
func TestEventStreamEndsWhenItsKeyIsRevoked(t *testing.T) {
	f := newACLFixture(t)
	key, prefix := f.newKey(f.tokens[roleView])
	events := openEvents(t, f.url, key)
	other := openEvents(t, f.url, f.tokens[roleView])

	f.as(f.tokens[roleView], "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(200)
	expectRevoked(t, events, 401, "api key was revoked")
	// The same user's stream opened with their login goes on.
	job := f.run("hello")
	if ev := nextJob(t, other); ev.name != "job" || ev.data["job_id"] != job {
		t.Fatalf("the login's stream got %s %v, want job %s", ev.name, ev.data, job)
	}
}

// Logging out ends the streams opened with that login's access token.
func TestEventStreamEndsWhenItsLoginLogsOut(t *testing.T) {
	f := newACLFixture(t)
	access, refresh := f.login("view@example.com", "pw")
	events := openEvents(t, f.url, access)

	f.api("POST", "/api/auth/logout", map[string]string{"refresh_token": refresh}).expect(200)
	expectRevoked(t, events, 401, "login ended")
}

// A revocation made behind the API's back (here in the store itself) is
// caught by the periodic re-check, shortened for the test.
func TestEventStreamRechecksPeriodically(t *testing.T) {
	f := newACLFixture(t, func(c *fixtureConfig) { c.StreamRecheck = 100 * time.Millisecond })
	key, prefix := f.newKey(f.tokens[roleView])
	events := openEvents(t, f.url, key)

	if err := f.users.DeleteAPIKey(context.Background(), f.ids[roleView], prefix); err != nil {
		t.Fatal(err)
	}
	expectRevoked(t, events, 401, "api key was revoked")
}

// After a group change or an ACL reload an open event stream filters by
// the new rules at once; a follower of a job the ACL now hides is ended
// with 403.
func TestEventStreamFollowsGroupChangesAndACLReloads(t *testing.T) {
	var acl *accounts.ACL
	f := newACLFixture(t, ownACL(&acl))
	admin, view := f.tokens[roleAdmin], f.tokens[roleView]
	hello := f.run("hello")
	feed := openEvents(t, f.url, view)
	follow := openEventsQuery(t, f.url, view, "&job_id="+hello)

	// viewers see hello (demo/*), not other; as runners they see both.
	f.as(admin, "PUT", "/api/users/"+f.ids[roleView]+"/groups", map[string]any{"groups": []string{"runners"}}).expect(200)
	other := f.run("other")
	if ev := nextJob(t, feed); ev.data["job_id"] != other {
		t.Fatalf("after joining runners the feed got %s %v, want job %s of other", ev.name, ev.data, other)
	}

	// Reloaded, the ACL gives runners nothing but other.
	acl.Replace(&accounts.ACL{Default: accounts.Deny, Rules: []accounts.ACLRule{
		{Workspace: "main", Tasks: []string{"other"}, Action: accounts.View, Groups: []string{"runners"}},
	}})
	expectRevoked(t, follow, 403, "no longer view")
	f.run("hello")
	again := f.run("other")
	if ev := nextJob(t, feed); ev.data["job_id"] != again {
		t.Fatalf("after the reload the feed got %s %v, want job %s of other (hello is hidden now)", ev.name, ev.data, again)
	}
}

// The log stream closes 4401 when its key is revoked and 4403 when an ACL
// reload hides its job; a viewer the reload still allows goes on.
func TestLogStreamClosesOnRevocationAndOnAnACLReloadThatHidesTheJob(t *testing.T) {
	var acl *accounts.ACL
	f := newACLFixture(t, ownACL(&acl))
	job := f.run("hello")
	key, prefix := f.newKey(f.tokens[roleView])
	byKey := f.watchFrom(job, "token="+key)
	viewer := f.watchFrom(job, "token="+f.tokens[roleView])
	runner := f.watchFrom(job, "token="+f.tokens[roleRun])

	f.as(f.tokens[roleView], "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(200)
	byKey.expectClose(4401, "api key was revoked")

	acl.Replace(&accounts.ACL{Default: accounts.Deny, Rules: []accounts.ACLRule{
		{Workspace: "main", Tasks: []string{"*"}, Action: accounts.Run, Groups: []string{"runners"}},
	}})
	viewer.expectClose(4403, "no longer view")

	w := f.register("w")
	f.claimStep(w, job, "say")
	f.pushLogs(w, job, "say", "still here")
	runner.await("still here")
}

// The expiry of the access token a stream was opened with does not end
// it: a follower of a long job outlives a short-lived token, through its
// re-checks.
func TestStreamsOutliveTheirAccessToken(t *testing.T) {
	const ttl = time.Second
	f := newACLFixture(t, func(c *fixtureConfig) {
		c.Auth.AccessTokenTTL = ttl
		c.StreamRecheck = 50 * time.Millisecond
		c.EventsPing = 50 * time.Millisecond
	})
	access, _ := f.login("view@example.com", "pw")
	job := f.run("hello")
	opened := time.Now()
	events := openEvents(t, f.url, access)
	logs := f.watchFrom(job, "token="+access)

	// The token expires by the auth clock (requests refuse it) and by the
	// wall clock (the stream's own timers) while the streams re-check.
	f.clock.Advance(time.Hour)
	f.as(access, "GET", "/api/auth/me", nil).expect(401)
	for time.Since(opened) < 2*ttl {
		if ev := next(t, events); ev.name != ":" {
			t.Fatalf("the stream got %s %v, want pings only", ev.name, ev.data)
		}
	}
	f.tokens[roleAdmin], _ = f.login("admin@example.com", "pw")
	admin := f.tokens[roleAdmin]
	// A group change re-checks the streams before anything later is sent.
	f.as(admin, "PUT", "/api/users/"+f.ids[roleView]+"/groups", map[string]any{"groups": []string{"viewers"}}).expect(200)
	next := f.run("hello")
	if ev := nextJob(t, events); ev.name != "job" || ev.data["job_id"] != next {
		t.Fatalf("the stream of an expired token got %s %v, want job %s", ev.name, ev.data, next)
	}
	w := f.register("w")
	f.claimStep(w, job, "say")
	f.pushLogs(w, job, "say", "after expiry")
	logs.await("after expiry")
}
