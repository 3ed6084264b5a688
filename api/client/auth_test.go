package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/appliance-sh/appliance/api/wire"
)

func TestLoginCarriesAndReturnsTheDeviceCookie(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.LoginRequest
		ck, err := r.Cookie(DeviceCookieName)
		if r.URL.Path != "/api/auth/login" || r.Header.Get("Authorization") != "" || err != nil || ck.Value != "old" ||
			json.NewDecoder(r.Body).Decode(&req) != nil || req != (wire.LoginRequest{Email: "a@example.com", Password: "pw"}) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: DeviceCookieName, Value: "new"})
		json.NewEncoder(w).Encode(wire.TokenPair{AccessToken: "a", RefreshToken: "r"})
	}))
	defer srv.Close()
	pair, device, err := New(srv.URL, WithToken("ignored")).Login(context.Background(), wire.LoginRequest{Email: "a@example.com", Password: "pw"}, "old")
	if err != nil || *pair != (wire.TokenPair{AccessToken: "a", RefreshToken: "r"}) || device != "new" {
		t.Fatalf("pair %+v, device %q, err %v", pair, device, err)
	}
}

func TestAsSendsItsTokenAndRenewsNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer key" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(wire.Me{Email: "a@example.com"})
	}))
	defer srv.Close()
	cr := &creds{}
	me, _, err := New(srv.URL, WithCredentials(cr)).As("key").Me(context.Background())
	if err != nil || me.Email != "a@example.com" || cr.refreshed != 0 {
		t.Fatalf("me %+v, err %v, refreshed %d", me, err, cr.refreshed)
	}
}
