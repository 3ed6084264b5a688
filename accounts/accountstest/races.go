package accountstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

// race runs f(0..n-1) at once, each on its own goroutine released by one
// signal, and returns their errors by index.
func race(n int, f func(i int) error) []error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// tally counts the nil errors and those that are want; any other error
// fails the test.
func tally(t *testing.T, what string, errs []error, want error) (ok, wanted int) {
	t.Helper()
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, want):
			wanted++
		default:
			t.Fatalf("%s: unexpected error %v", what, err)
		}
	}
	return ok, wanted
}

// Two admins demoting each other at the same moment: the store decides in
// the transaction that writes, so exactly one succeeds and the other sees
// that it would remove the last admin.
func raceMutualDemotion(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	for round := range 20 {
		a, b := "a"+string(rune('a'+round)), "b"+string(rune('a'+round))
		newAdmin(t, s, a, 2*round)
		newAdmin(t, s, b, 2*round+1)
		// Only the pair of this round may be admins: demote the previous
		// round's survivor first (allowed: a or b of this round remains).
		users, _, _ := s.Users(ctx, 100, 0)
		for _, u := range users {
			if u.IsAdmin && u.ID != a && u.ID != b {
				if _, err := s.SetAdmin(ctx, u.ID, false); err != nil {
					t.Fatalf("demote %s: %v", u.ID, err)
				}
			}
		}
		ids := []string{b, a} // a demotes b, b demotes a
		if round%2 == 1 {
			// Odd rounds: one demotes, the other deletes.
			errs := race(2, func(i int) error {
				if i == 0 {
					_, err := s.SetAdmin(ctx, ids[i], false)
					return err
				}
				return s.DeleteUser(ctx, ids[i])
			})
			ok, last := tally(t, fmt.Sprintf("round %d", round), errs, accounts.ErrLastAdmin)
			if ok != 1 || last != 1 {
				t.Fatalf("round %d: %d changes succeeded and %d refused as last admin, want 1 and 1", round, ok, last)
			}
		} else {
			errs := race(2, func(i int) error {
				_, err := s.SetAdmin(ctx, ids[i], false)
				return err
			})
			ok, last := tally(t, fmt.Sprintf("round %d", round), errs, accounts.ErrLastAdmin)
			if ok != 1 || last != 1 {
				t.Fatalf("round %d: %d demotions succeeded and %d refused as last admin, want 1 and 1", round, ok, last)
			}
		}
		if n := countAdmins(t, s); n != 1 {
			t.Fatalf("round %d: %d admins left, want 1", round, n)
		}
	}
}

// First logins of one identity at once create one user.
func raceFirstLogins(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	ids := make([]string, 8)
	errs := race(8, func(i int) error {
		u, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "google", Subject: "same"}, "same@x.io", newUser(fmt.Sprintf("u%d", i), "same@x.io", i), accounts.LinkRule{EmailVerified: true})
		if u != nil {
			ids[i] = u.ID
		}
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ProvisionLinkedUser: %v", err)
		}
		if ids[i] != ids[0] {
			t.Fatalf("two users for one identity: %s and %s", ids[0], ids[i])
		}
	}
	if _, total, err := s.Users(ctx, 0, 0); err != nil || total != 1 {
		t.Fatalf("users total = %d, %v; want 1", total, err)
	}
	if u, err := s.User(ctx, ids[0]); err != nil || len(u.OIDCProviders) != 1 {
		t.Fatalf("the user = %+v, %v; want one provider, once", u, err)
	}
}

// First logins of two identities with one verified email at once: one
// creates the user, the other links to it.
func raceTwoIdentities(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	for round := range 10 {
		email := fmt.Sprintf("both%d@x.io", round)
		ids := make([]string, 2)
		providers := []string{"google", "okta"}
		errs := race(2, func(i int) error {
			u, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: providers[i], Subject: fmt.Sprintf("s%d", round)}, email,
				newUser(fmt.Sprintf("r%d-%d", round, i), email, round), accounts.LinkRule{EmailVerified: true})
			if u != nil {
				ids[i] = u.ID
			}
			return err
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if ids[0] != ids[1] {
			t.Fatalf("round %d: one email, two users: %s and %s", round, ids[0], ids[1])
		}
		u, err := s.UserByEmail(ctx, email)
		if err != nil || u.ID != ids[0] || len(u.OIDCProviders) != 2 {
			t.Fatalf("round %d: user %+v, %v; want %s linked to both providers", round, u, err, ids[0])
		}
	}
	if _, total, err := s.Users(ctx, 0, 0); err != nil || total != 10 {
		t.Fatalf("users total = %d, %v; want 10, one a round", total, err)
	}
}

// Sign-ups with one email at once: one user, the others ErrEmailTaken.
func raceCreateUser(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	errs := race(8, func(i int) error {
		email := "same@x.io"
		if i%2 == 1 {
			email = strings.ToUpper(email) // unique in any letter case
		}
		return s.CreateUser(ctx, newUser(fmt.Sprintf("u%d", i), email, i))
	})
	ok, taken := tally(t, "CreateUser", errs, accounts.ErrEmailTaken)
	if ok != 1 || taken != 7 {
		t.Fatalf("%d created and %d refused as taken, want 1 and 7", ok, taken)
	}
	if _, total, err := s.Users(ctx, 0, 0); err != nil || total != 1 {
		t.Fatalf("users total = %d, %v; want 1", total, err)
	}
}

// Two requests rotating one refresh token at once: one gets the
// successor, the other is a reuse, which revokes the whole family (the
// winner's new token too).
func raceRotations(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	for round := range 20 {
		fam := fmt.Sprintf("f%d", round)
		putTokens(t, s, &accounts.RefreshToken{Hash: fam + "-0", UserID: "u1", Family: fam, ExpiresAt: t0.Add(time.Hour)})
		errs := race(2, func(i int) error {
			_, err := rotate(s, fam+"-0", fmt.Sprintf("%s-next%d", fam, i), t0)
			return err
		})
		ok, reused := tally(t, fmt.Sprintf("round %d", round), errs, accounts.ErrTokenReused)
		if ok != 1 || reused != 1 {
			t.Fatalf("round %d: %d rotations won and %d were reuses, want 1 and 1", round, ok, reused)
		}
		if live, err := s.RefreshFamilyLive(ctx, fam); err != nil || live {
			t.Fatalf("round %d: family live = %v, %v after a reuse; want revoked", round, live, err)
		}
		for i := range 2 {
			if _, err := rotate(s, fmt.Sprintf("%s-next%d", fam, i), "x", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
				t.Fatalf("round %d: successor %d after the reuse: %v, want ErrRefreshTokenNotFound", round, i, err)
			}
		}
	}
}
