// Package accountstest is one conformance suite for every implementation
// of the accounts port (accounts.UserStore): what bbolt does, PostgreSQL
// does, including under concurrent callers.
// It must not import net/http, a database driver, store, api, app or
// runners.
package accountstest

import (
	"context"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

// Backend opens stores for the suite.
type Backend struct {
	// Open returns a new, empty store, closed by the test's cleanup.
	Open func(t *testing.T) accounts.UserStore
	// Reopen closes s and opens the same data again, as a restarted
	// server (or another replica) would see it.
	Reopen func(t *testing.T, s accounts.UserStore) accounts.UserStore
}

// t0 is the suite's epoch, so record times, and thus orders, are exact.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs every case of the suite against the backend.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		run  func(t *testing.T, s accounts.UserStore)
	}{
		{"UserEmailIsUniqueInAnyLetterCase", emailUniqueInAnyCase},
		{"UsersPageInCreationOrderWithTotal", usersPage},
		{"GroupsListsNamesInUseAndForgetsEmptyOnes", groups},
		{"RecordsRoundTripExactly", recordsRoundTrip},
		{"InvalidRecordsAreRefused", invalidRecords},
		{"UnstorableNamesAreNotFound", unstorableLookups},
		{"ProvisionLinkedUserFollowsTheThreeRules", provisionThreeRules},
		{"ProvisionLinkedUserLinksOnlyWhatTheRuleAllows", provisionRule},
		{"RefreshTokenRotatesAlongItsFamily", refreshRotates},
		{"ReusedRefreshTokenRevokesItsFamily", refreshReuse},
		{"RefreshTokenExpires", refreshExpires},
		{"RotationShedsExpiredTokensOfTheFamily", refreshSheds},
		{"RefreshTokenWithoutFamilyIsItsOwnFamily", refreshNoFamily},
		{"RevokeRefreshFamilyIsIdempotent", refreshRevokeTwice},
		{"APIKeysAreListedAndRevokedPerOwner", apiKeysPerOwner},
		{"TouchAPIKeyRecordsLastUse", apiKeyTouch},
		{"LastAdminCannotBeDeletedOrDemoted", lastAdmin},
		{"DeleteUserRemovesEverythingTheyHeld", deleteUser},
		{"SetPasswordRevokesOtherLoginsAndOnRequestTheKeys", setPassword},
		{"AccountChangesCommitWithTheirAuditEntry", auditWithChanges},
		// Races: what a single-writer store gets for free, and a database
		// with concurrent transactions must decide in the transaction.
		{"ConcurrentMutualDemotionKeepsOneAdmin", raceMutualDemotion},
		{"ConcurrentFirstLoginsCreateOneUser", raceFirstLogins},
		{"ConcurrentFirstLoginsOfTwoIdentitiesShareOneUser", raceTwoIdentities},
		{"ConcurrentCreateUserWithOneEmailCreatesOne", raceCreateUser},
		{"ConcurrentRotationsOfOneTokenRevokeTheFamily", raceRotations},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b.Open(t)) })
	}
	t.Run("EverythingSurvivesAReopen", func(t *testing.T) { survivesReopen(t, b) })
}

func newUser(id, email string, i int) *accounts.User {
	return &accounts.User{ID: id, Email: email, Groups: []string{}, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
}

func createUsers(t *testing.T, s accounts.UserStore, users ...*accounts.User) {
	t.Helper()
	for _, u := range users {
		if err := s.CreateUser(context.Background(), u); err != nil {
			t.Fatalf("CreateUser %s: %v", u.ID, err)
		}
	}
}

func newAdmin(t *testing.T, s accounts.UserStore, id string, i int) {
	t.Helper()
	u := newUser(id, id+"@x.io", i)
	u.IsAdmin = true
	createUsers(t, s, u)
}

func countAdmins(t *testing.T, s accounts.UserStore) int {
	t.Helper()
	users, _, err := s.Users(context.Background(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range users {
		if u.IsAdmin {
			n++
		}
	}
	return n
}

func putTokens(t *testing.T, s accounts.UserStore, tokens ...*accounts.RefreshToken) {
	t.Helper()
	for _, tok := range tokens {
		if err := s.PutRefreshToken(context.Background(), tok); err != nil {
			t.Fatalf("PutRefreshToken %s: %v", tok.Hash, err)
		}
	}
}

func createKeys(t *testing.T, s accounts.UserStore, keys ...*accounts.APIKey) {
	t.Helper()
	for _, k := range keys {
		if err := s.CreateAPIKey(context.Background(), k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.Hash, err)
		}
	}
}

// rotate rotates old into a token named next that expires an hour after at.
func rotate(s accounts.UserStore, old, next string, at time.Time) (*accounts.RefreshToken, error) {
	return s.RotateRefreshToken(context.Background(), old, &accounts.RefreshToken{Hash: next, ExpiresAt: at.Add(time.Hour)}, at)
}

func ptr[T any](v T) *T { return &v }
