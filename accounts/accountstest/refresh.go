package accountstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

func refreshRotates(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s, &accounts.RefreshToken{Hash: "h1", UserID: "u1", Family: "f1", ExpiresAt: t0.Add(time.Hour)})
	for i, step := range [][2]string{{"h1", "h2"}, {"h2", "h3"}, {"h3", "h4"}} {
		old, err := rotate(s, step[0], step[1], t0.Add(time.Duration(i)*time.Minute))
		if err != nil || old.UserID != "u1" || old.Family != "f1" {
			t.Fatalf("rotate %s: %+v, %v", step[0], old, err)
		}
	}
	if live, err := s.RefreshFamilyLive(ctx, "f1"); err != nil || !live {
		t.Fatalf("family live = %v, %v; want true", live, err)
	}
	if live, err := s.RefreshFamilyLive(ctx, "f-unknown"); err != nil || live {
		t.Fatalf("unknown family live = %v, %v; want false", live, err)
	}
	if _, err := rotate(s, "never-issued", "x", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("rotating an unknown token: got %v, want ErrRefreshTokenNotFound", err)
	}
}

func refreshReuse(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s,
		&accounts.RefreshToken{Hash: "a1", UserID: "u1", Family: "fa", ExpiresAt: t0.Add(time.Hour)},
		&accounts.RefreshToken{Hash: "b1", UserID: "u1", Family: "fb", ExpiresAt: t0.Add(time.Hour)}, // another login
	)
	if _, err := rotate(s, "a1", "a2", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := rotate(s, "a2", "a3", t0); err != nil {
		t.Fatal(err)
	}
	old, err := rotate(s, "a1", "x", t0)
	if !errors.Is(err, accounts.ErrTokenReused) || old == nil || old.UserID != "u1" {
		t.Fatalf("reusing a1: %+v, %v; want ErrTokenReused with the token", old, err)
	}
	for _, h := range []string{"a1", "a2", "a3", "x"} {
		if _, err := rotate(s, h, "y", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
			t.Fatalf("%s after reuse: got %v, want ErrRefreshTokenNotFound", h, err)
		}
	}
	if live, _ := s.RefreshFamilyLive(ctx, "fa"); live {
		t.Fatal("revoked family is still live")
	}
	if _, err := rotate(s, "b1", "b2", t0); err != nil {
		t.Fatalf("the other login was revoked too: %v", err)
	}
}

func refreshExpires(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s, &accounts.RefreshToken{Hash: "h1", UserID: "u1", Family: "f", ExpiresAt: t0.Add(time.Hour)})
	// h2 inherited u1, and is expired at its expiry instant.
	if _, err := rotate(s, "h1", "h2", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := rotate(s, "h2", "h3", t0.Add(time.Hour)); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("expired h2: got %v, want ErrRefreshTokenNotFound", err)
	}
	// Both are gone: h2 was deleted, and h1, rotated, expired with it.
	if live, _ := s.RefreshFamilyLive(ctx, "f"); live {
		t.Fatal("expired family kept its index")
	}
	// A nanosecond before its expiry a token is still good.
	putTokens(t, s, &accounts.RefreshToken{Hash: "n1", UserID: "u1", Family: "fn", ExpiresAt: t0.Add(time.Hour + time.Nanosecond)})
	if _, err := rotate(s, "n1", "n2", t0.Add(time.Hour)); err != nil {
		t.Fatalf("a token a nanosecond before its expiry: %v", err)
	}
}

// A rotation sheds the family's expired tokens: a rotated token that has
// expired is unknown afterwards, even to a caller whose clock says it is
// still good, rather than a reuse that would revoke the login.
func refreshSheds(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s, &accounts.RefreshToken{Hash: "h0", UserID: "u1", Family: "f", ExpiresAt: t0.Add(time.Hour)})
	// Each rotation half an hour after the last: a token expires an hour
	// after it is issued, so only the last two may remain.
	for i := 1; i <= 5; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Minute)
		old := fmt.Sprintf("h%d", i-1)
		if _, err := s.RotateRefreshToken(ctx, old, &accounts.RefreshToken{Hash: fmt.Sprintf("h%d", i), ExpiresAt: at.Add(time.Hour)}, at); err != nil {
			t.Fatalf("rotate %s: %v", old, err)
		}
	}
	for _, h := range []string{"h0", "h1", "h2", "h3"} {
		if _, err := rotate(s, h, "x", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
			t.Fatalf("shed token %s: got %v, want ErrRefreshTokenNotFound", h, err)
		}
	}
	if live, _ := s.RefreshFamilyLive(ctx, "f"); !live {
		t.Fatal("shedding expired tokens ended the login")
	}
	at := t0.Add(150 * time.Minute)
	if _, err := rotate(s, "h4", "y", at); !errors.Is(err, accounts.ErrTokenReused) {
		t.Fatalf("the last rotated token, still unexpired: got %v, want ErrTokenReused", err)
	}
}

// A token stored without a family is the first of a family named by its
// hash, as the records from before families are.
func refreshNoFamily(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s, &accounts.RefreshToken{Hash: "old", UserID: "u1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	if live, _ := s.RefreshFamilyLive(ctx, "old"); !live {
		t.Fatal("a token without a family is not live under its hash")
	}
	old, err := rotate(s, "old", "new", t0)
	if err != nil || old.UserID != "u1" || old.FamilyID() != "old" {
		t.Fatalf("rotate the token without a family: %+v, %v", old, err)
	}
	if live, _ := s.RefreshFamilyLive(ctx, "old"); !live {
		t.Fatal("the token's successor is not in the family named by its hash")
	}
	if _, err := rotate(s, "old", "x", t0); !errors.Is(err, accounts.ErrTokenReused) {
		t.Fatalf("reusing the token: %v, want ErrTokenReused", err)
	}
	if _, err := rotate(s, "new", "y", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("successor after reuse: %v, want ErrRefreshTokenNotFound", err)
	}
}

func refreshRevokeTwice(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	putTokens(t, s, &accounts.RefreshToken{Hash: "h", UserID: "u", Family: "f", ExpiresAt: t0.Add(time.Hour)})
	if _, err := rotate(s, "h", "h2", t0); err != nil {
		t.Fatal(err)
	}
	// Logging out with the rotated token revokes the current one too, and
	// names the user once; the second time there is nothing left.
	for i, want := range []string{"u", ""} {
		user, err := s.RevokeRefreshFamily(ctx, "h")
		if err != nil || user != want {
			t.Fatalf("RevokeRefreshFamily #%d = %q, %v; want user %q", i+1, user, err, want)
		}
	}
	if _, err := rotate(s, "h2", "h3", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("revoked token rotated: %v", err)
	}
}
