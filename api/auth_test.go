package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/appliance-sh/appliance/api/auth"
)

func TestWithoutAuthEverythingIsOpenAndAuthEndpointsAre404(t *testing.T) {
	f := newFixture(t)
	cfg := f.api("GET", "/api/config", nil).expect(200).object()
	if cfg["auth_required"] != false || cfg["has_internal_auth"] != false || cfg["acl_enabled"] != false {
		t.Fatalf("config without auth: %v", cfg)
	}
	if p, ok := cfg["oidc_providers"].([]any); !ok || len(p) != 0 {
		t.Fatalf("oidc_providers = %v, want []", cfg["oidc_providers"])
	}
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/auth/login"}, {"POST", "/api/auth/refresh"}, {"POST", "/api/auth/logout"},
		{"GET", "/api/auth/me"}, {"POST", "/api/auth/api-keys"}, {"GET", "/api/auth/api-keys"},
		{"GET", "/api/auth/oidc/google"}, {"GET", "/api/users"}, {"GET", "/api/groups"},
	} {
		f.api(r.method, r.path, map[string]string{}).expect(http.StatusNotFound).errorMessage()
	}
	id := f.execute("anon")
	job := f.api("GET", "/api/jobs?workspace=main", nil).expect(200).object()["items"].([]any)[0].(map[string]any)
	if job["job_id"] != id || job["source_type"] != "api" || job["source_id"] != nil {
		t.Fatalf("job without auth: %v, want source_type api and no source_id", job)
	}
}

func TestConfigDescribesProvidersWithAuthOn(t *testing.T) {
	f := newAuthFixture(t, map[string]auth.Provider{
		"okta":   {Type: auth.ProviderOIDC, IssuerURL: "http://127.0.0.1:1/none", ClientID: "c", ClientSecret: "s"},
		"google": {Type: auth.ProviderOIDC, DisplayName: "Google", IssuerURL: "http://127.0.0.1:1/none", ClientID: "c", ClientSecret: "s"},
	})
	cfg := f.api("GET", "/api/config", nil).expect(200).object()
	assertKeys(t, "config", cfg, "auth_required", "has_internal_auth", "oidc_providers", "acl_enabled", "version")
	if cfg["auth_required"] != true || cfg["has_internal_auth"] != true || cfg["acl_enabled"] != false {
		t.Fatalf("config with auth: %v", cfg)
	}
	got := cfg["oidc_providers"].([]any)
	want := []map[string]any{{"id": "google", "display_name": "Google"}, {"id": "okta", "display_name": "okta"}}
	if len(got) != len(want) {
		t.Fatalf("oidc_providers = %v, want %v", got, want)
	}
	for i, w := range want {
		g := got[i].(map[string]any)
		if g["id"] != w["id"] || g["display_name"] != w["display_name"] {
			t.Fatalf("oidc_providers[%d] = %v, want %v", i, g, w)
		}
	}
}

func TestLoginRefreshRotatesAndLogoutRevokes(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "correct horse", false)

	access, refresh := f.login("ADA@example.com", "correct horse")
	f.as(access, "GET", "/api/auth/me", nil).expect(200)

	m := f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": refresh}).expect(200).object()
	access2, refresh2 := m["access_token"].(string), m["refresh_token"].(string)
	if refresh2 == "" || refresh2 == refresh || access2 == "" {
		t.Fatalf("refresh returned %v", m)
	}
	f.as(access2, "GET", "/api/auth/me", nil).expect(200)
	// (Presenting the old refresh token again is reuse: auth_limits_test.go.)

	f.api("POST", "/api/auth/logout", map[string]string{"refresh_token": refresh2}).expect(200)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": refresh2}).expectError(401, "refresh token")
	// The login's access tokens died with it.
	f.as(access2, "GET", "/api/auth/me", nil).expect(401)
	f.as(access, "GET", "/api/auth/me", nil).expect(401)
	// Logging out twice is harmless.
	if s := f.api("POST", "/api/auth/logout", map[string]string{"refresh_token": refresh2}).expect(200).object()["status"]; s != "ok" {
		t.Fatalf("logout status = %v", s)
	}
	f.api("POST", "/api/auth/refresh", map[string]string{}).expectError(400, "refresh_token")
}

func TestRefreshTokenExpiresAfterThirtyDays(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	_, refresh := f.login("ada@example.com", "pw")
	f.clock.Advance(30 * 24 * time.Hour)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": refresh}).expectError(401, "expired")
}

func TestBadCredentialsGetOneMessage(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "right", false)
	wrongPassword := f.api("POST", "/api/auth/login", map[string]string{"email": "ada@example.com", "password": "wrong"}).expect(401).errorMessage()
	unknownEmail := f.api("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": "right"}).expect(401).errorMessage()
	if wrongPassword != unknownEmail {
		t.Fatalf("messages differ: %q vs %q (they would reveal which emails exist)", wrongPassword, unknownEmail)
	}
	f.api("POST", "/api/auth/login", map[string]string{"email": "ada@example.com"}).expectError(400, "password")
	f.api("POST", "/api/auth/login", "{not json").expect(400).errorMessage()
}

func TestProtectedRoutesRefuseMissingOrBadTokens(t *testing.T) {
	f := newAuthFixture(t, nil)
	userID := f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")

	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := f.clock.Now()
	// A token names its login (sid), whose logout or revocation ends it.
	var issued jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(access, &issued); err != nil || issued["sid"] == nil {
		t.Fatalf("access token claims %v (%v), want a sid", issued, err)
	}
	valid := jwt.MapClaims{"sub": userID, "email": "ada@example.com", "sid": issued["sid"], "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	withoutLogin := jwt.MapClaims{"sub": userID, "email": "ada@example.com", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	tests := []struct {
		name   string
		header string
	}{
		{"no header", ""},
		{"not bearer", "Basic " + access},
		{"garbage", "Bearer not-a-token"},
		{"other secret", "Bearer " + sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), valid)},
		{"alg none", "Bearer " + sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid)},
		{"no expiry", "Bearer " + sign(jwt.SigningMethodHS256, testJWTSecret, jwt.MapClaims{"sub": userID})},
		{"no login, so never revocable", "Bearer " + sign(jwt.SigningMethodHS256, testJWTSecret, withoutLogin)},
		{"unknown user", "Bearer " + sign(jwt.SigningMethodHS256, testJWTSecret, jwt.MapClaims{"sub": "ghost", "sid": issued["sid"], "exp": now.Add(time.Minute).Unix()})},
		{"unknown api key", "Bearer appk_0123456789abcdef0123456789abcdef"},
		{"truncated api key", "Bearer appk_0123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.header != "" {
				h["Authorization"] = tt.header
			}
			for _, path := range []string{"/api/workspaces", "/api/jobs", "/api/auth/me", "/api/no-such-route"} {
				f.in(t).do("GET", path, nil, h).expect(401).errorMessage()
			}
		})
	}
	// The hand-signed valid token works, so the failures above are the flaws.
	f.as(sign(jwt.SigningMethodHS256, testJWTSecret, valid), "GET", "/api/workspaces", nil).expect(200)

	f.clock.Advance(15*time.Minute + time.Second)
	f.as(access, "GET", "/api/workspaces", nil).expectError(401, "expired")
}

func TestPublicRoutesAndOtherCredentialsIgnoreUserAuth(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.api("GET", "/api/config", nil).expect(200)
	f.api("GET", "/healthz", nil).expect(200)
	// Worker endpoints take the worker token, not a user's.
	f.register("w1")
	// Webhooks take their trigger's secret: without a user token a wrong
	// secret is refused for the secret, and the right one reaches the task
	// (whose required input the bare call lacks).
	f.api("POST", "/hooks/incoming-hook?secret=nope", map[string]any{"x": 1}).expectError(401, "webhook secret")
	f.api("POST", "/hooks/incoming-hook?secret=s3cret", map[string]any{"x": 1}).expectError(400, `input "name"`)
}

func TestMeDescribesTheCaller(t *testing.T) {
	f := newAuthFixture(t, nil)
	id := f.addUser("ada@example.com", "pw", true)
	access, _ := f.login("ada@example.com", "pw")
	me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object()
	assertKeys(t, "me", me, "user_id", "name", "email", "is_admin", "groups", "created_at")
	if me["user_id"] != id || me["email"] != "ada@example.com" || me["is_admin"] != true || me["name"] != nil {
		t.Fatalf("me = %v", me)
	}
	if g, ok := me["groups"].([]any); !ok || len(g) != 0 {
		t.Fatalf("groups = %v, want []", me["groups"])
	}
	if ts, _ := me["created_at"].(string); !strings.HasSuffix(ts, "Z") {
		t.Fatalf("created_at = %v, want a UTC timestamp", me["created_at"])
	}
	f.api("GET", "/api/auth/me", nil).expect(401)
}

func TestJobsCreatedByAUserAreAttributedToThem(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	m := f.as(access, "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}).expect(200).object()
	job := f.as(access, "GET", "/api/jobs?workspace=main", nil).expect(200).object()["items"].([]any)[0].(map[string]any)
	if job["job_id"] != m["job_id"] || job["source_type"] != "user" || job["source_id"] != "ada@example.com" {
		t.Fatalf("job = %v, want source_type user and source_id the email", job)
	}
}

func TestApprovalRecordsTheApproversEmail(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	writeFile(t, f.wsDir+"/.workflows/approve.yaml", `
tasks:
  gated:
    flow:
      gate:
        type: approval
        message: ship it?
`, 0o644)
	eventually(t, "the approval task to load", func() bool {
		return f.as(access, "GET", "/api/workspaces/main/tasks/gated", nil).status == 200
	})
	id := f.as(access, "POST", "/api/workspaces/main/tasks/gated/execute", map[string]any{}).expect(200).object()["job_id"].(string)
	var status int
	eventually(t, "the approval step to wait", func() bool {
		status = f.as(access, "POST", "/api/jobs/"+id+"/steps/gate/approve", map[string]any{"approved": true}).status
		return status == 200
	})
	steps := f.as(access, "GET", "/api/jobs/"+id, nil).expect(200).object()["steps"].([]any)
	out, _ := steps[0].(map[string]any)["output"].(map[string]any)
	if out["approved_by"] != "ada@example.com" {
		t.Fatalf("approval output = %v, want approved_by the user's email", out)
	}
}

func TestLogStreamAcceptsTheTokenAsAQueryParameter(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	id := f.as(access, "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}).expect(200).object()["job_id"].(string)
	w := f.register("w")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "first line")

	base := "ws" + strings.TrimPrefix(f.url, "http") + "/api/jobs/" + id + "/logs/stream"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, base, dialOptions(nil))
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without token: err %v, response %v; want a 401", err, resp)
	}
	_, resp, err = websocket.Dial(ctx, base+"?token=wrong", dialOptions(nil))
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial with a bad token: err %v; want a 401", err)
	}
	conn, _, err := websocket.Dial(ctx, base+"?token="+access, dialOptions(nil))
	if err != nil {
		t.Fatalf("dial with ?token=: %v", err)
	}
	defer conn.CloseNow()
	_, data, err := conn.Read(ctx)
	if err != nil || !strings.Contains(string(data), "first line") {
		t.Fatalf("backfill = %q, %v", data, err)
	}
	// ?token= is only for the stream: other routes want the header.
	f.api("GET", "/api/jobs/"+id+"?token="+access, nil).expect(401)
}
