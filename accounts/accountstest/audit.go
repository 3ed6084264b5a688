package accountstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
)

type auditStore interface {
	accounts.UserStore
	audit.Store
	SetAuditKey(audit.Key)
}

var suiteKey = audit.Key("accountstest audit chain key")

func entry(action, target string) audit.Entry {
	return audit.Entry{At: t0, Actor: audit.Actor{ID: "admin", Email: "root@example.com"}, Source: audit.SourceUser,
		Action: action, Target: target, Outcome: audit.OK, ClientAddress: "198.51.100.7"}
}

// auditWithChanges: an account change carrying an entry (audit.WithEntry)
// writes it in its own transaction, chained after the others; a change
// refused writes none; concurrent changes append one after the other.
func auditWithChanges(t *testing.T, s accounts.UserStore) {
	st, ok := s.(auditStore)
	if !ok {
		t.Skip("this store keeps no audit trail")
	}
	st.SetAuditKey(suiteKey)
	with := func(action, target string) context.Context {
		return audit.WithEntry(context.Background(), entry(action, target))
	}
	admin := newUser("admin", "root@example.com", 0)
	admin.IsAdmin = true
	if err := st.CreateUser(with(audit.UserCreate, "user/admin"), admin); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAdmin(with(audit.UserUpdate, "user/admin"), "admin", false); !errors.Is(err, accounts.ErrLastAdmin) {
		t.Fatalf("demoting the last admin: %v", err)
	}
	if _, err := st.SetGroups(with(audit.UserUpdate, "user/admin"), "admin", []string{"ops"}); err != nil {
		t.Fatal(err)
	}
	key := &accounts.APIKey{Hash: "h1", Prefix: "p1", Name: "ci", UserID: "admin", CreatedAt: t0}
	if err := st.CreateAPIKey(with(audit.KeyCreate, "api_key/p1"), key); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteAPIKey(with(audit.KeyRevoke, "api_key/p1"), "admin", "p1"); err != nil {
		t.Fatal(err)
	}
	tok := &accounts.RefreshToken{Hash: "r1", UserID: "admin", Family: "f1", CreatedAt: t0, ExpiresAt: t0.Add(3600e9)}
	if err := st.PutRefreshToken(with(audit.SignIn, "user/admin"), tok); err != nil {
		t.Fatal(err)
	}
	// A sign-out names only a token: the store fills in its user. An
	// unknown token changes nothing and records nothing.
	signOut := audit.Entry{At: t0, Source: audit.SourceUser, Action: audit.SignOut, Outcome: audit.OK}
	if _, err := st.RevokeRefreshFamily(audit.WithEntry(context.Background(), signOut), "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeRefreshFamily(audit.WithEntry(context.Background(), signOut), "no such token"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("u%d", i)
			if err := st.CreateUser(with(audit.UserCreate, "user/"+id), newUser(id, id+"@example.com", i+1)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := st.DeleteUser(with(audit.UserDelete, "user/u0"), "u0"); err != nil {
		t.Fatal(err)
	}
	entries, err := st.AuditEntries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	anchor, head, err := st.AuditHeads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(suiteKey, anchor, entries, &head); err != nil {
		t.Fatalf("chain: %v", err)
	}
	want := []string{audit.UserCreate, audit.UserUpdate, audit.KeyCreate, audit.KeyRevoke, audit.SignIn, audit.SignOut}
	if len(entries) != len(want)+9 {
		t.Fatalf("%d entries, want %d", len(entries), len(want)+9)
	}
	for i, a := range want {
		if entries[i].Action != a {
			t.Errorf("entry %d: %s, want %s", i+1, entries[i].Action, a)
		}
	}
	if last := entries[len(entries)-1]; last.Action != audit.UserDelete || last.Target != "user/u0" {
		t.Errorf("last entry %+v", last)
	}
	if out := entries[5]; out.Action != audit.SignOut || out.Actor.ID != "admin" || out.Target != "user/admin" {
		t.Errorf("the sign-out's entry %+v: want the token's user as actor and target", out)
	}
}
