package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
)

var _ accounts.UserStore = (*DB)(nil)

// Buckets of the auth data.
var (
	bucketUsers       = []byte("users")              // user id -> user JSON
	bucketUserByEmail = []byte("idx_user_email")     // lower-case email -> user id
	bucketUserOrder   = []byte("idx_users")          // created time id
	bucketAuthLinks   = []byte("auth_links")         // provider \0 subject -> link JSON
	bucketRefresh     = []byte("refresh_tokens")     // token hash -> token JSON
	bucketRefreshFam  = []byte("idx_refresh_family") // family \0 expiry hash -> nil
	bucketAPIKeys     = []byte("api_keys")           // key hash -> key JSON
	bucketUserKeys    = []byte("idx_user_keys")      // user id \0 prefix -> key hash
	bucketUserRefresh = []byte("idx_user_refresh")   // user id \0 family -> nil
	authBuckets       = [][]byte{bucketUsers, bucketUserByEmail, bucketUserOrder, bucketAuthLinks, bucketRefresh, bucketRefreshFam, bucketAPIKeys, bucketUserKeys, bucketUserRefresh}
)

const countUsers = "users"

// countGroup counts a group's members; Groups lists these counters, so a
// group disappears with its last member.
func countGroup(name string) []byte { return strPrefix("group", name) }

var groupCounterPrefix = strPrefix("group")

func emailKey(email string) []byte { return []byte(strings.ToLower(email)) }

func userOrderKey(u *accounts.User) []byte {
	t := timeBytes(u.CreatedAt)
	return joinKey(t[:], []byte(u.ID))
}

// CreateUser stores a new user; an email already in use is
// accounts.ErrEmailTaken.
func (db *DB) CreateUser(ctx context.Context, u *accounts.User) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.update(ctx, func(tx *bolt.Tx) error { return insertUser(tx, u) })
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.Email, err)
	}
	return nil
}

func insertUser(tx *bolt.Tx, u *accounts.User) error {
	if u.ID == "" || u.Email == "" {
		return fmt.Errorf("user needs an id and an email: %w", accounts.ErrInvalidRecord)
	}
	if err := accountName("user id", u.ID); err != nil {
		return err
	}
	for _, g := range u.Groups {
		if err := accountName("group", g); err != nil {
			return err
		}
	}
	if tx.Bucket(bucketUserByEmail).Get(emailKey(u.Email)) != nil {
		return fmt.Errorf("%s: %w", u.Email, accounts.ErrEmailTaken)
	}
	if tx.Bucket(bucketUsers).Get([]byte(u.ID)) != nil {
		return fmt.Errorf("user id %s is already in use: %w", u.ID, accounts.ErrInvalidRecord)
	}
	if err := putUser(tx, u); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUserByEmail).Put(emailKey(u.Email), []byte(u.ID)); err != nil {
		return fmt.Errorf("index email: %w", err)
	}
	if err := tx.Bucket(bucketUserOrder).Put(userOrderKey(u), nil); err != nil {
		return fmt.Errorf("index user: %w", err)
	}
	if err := addCount(tx, []byte(countUsers), 1); err != nil {
		return err
	}
	for _, g := range u.Groups {
		if err := addCount(tx, countGroup(g), 1); err != nil {
			return err
		}
	}
	return nil
}

func putUser(tx *bolt.Tx, u *accounts.User) error {
	v, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode user: %w", err)
	}
	if err := tx.Bucket(bucketUsers).Put([]byte(u.ID), v); err != nil {
		return fmt.Errorf("put user: %w", err)
	}
	return nil
}

func getUser(tx *bolt.Tx, id string) (*accounts.User, error) {
	return getRecord[accounts.User](tx, bucketUsers, "user", id, accounts.ErrUserNotFound)
}

// User returns a user by id (accounts.ErrUserNotFound).
func (db *DB) User(ctx context.Context, id string) (*accounts.User, error) {
	return viewRecord(ctx, db, getUser, id)
}

// UserByEmail returns the user with that email, in any letter case
// (accounts.ErrUserNotFound).
func (db *DB) UserByEmail(ctx context.Context, email string) (*accounts.User, error) {
	var u *accounts.User
	err := db.view(ctx, func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketUserByEmail).Get(emailKey(email))
		if id == nil {
			return fmt.Errorf("user with email %s: %w", email, accounts.ErrUserNotFound)
		}
		var err error
		u, err = getUser(tx, string(id))
		return err
	})
	return u, err
}

// Users returns a page of users in creation order, and their total.
func (db *DB) Users(ctx context.Context, limit, offset int) ([]*accounts.User, int, error) {
	if offset < 0 {
		return nil, 0, fmt.Errorf("list users: negative offset %d: %w", offset, accounts.ErrInvalidRecord)
	}
	users, total, err := orderedPage(ctx, db, bucketUserOrder, countUsers, getUser, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list users: %w", err)
	}
	return users, total, nil
}

// updateUser applies change to a stored user in one transaction.
func (db *DB) updateUser(ctx context.Context, id string, change func(tx *bolt.Tx, u *accounts.User) error) (*accounts.User, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var u *accounts.User
	err := db.update(ctx, func(tx *bolt.Tx) error {
		var err error
		if u, err = getUser(tx, id); err != nil {
			return err
		}
		if err := change(tx, u); err != nil {
			return err
		}
		return putUser(tx, u)
	})
	return u, err
}

// SetAdmin grants or revokes a user's admin status. Revoking the last
// admin's is accounts.ErrLastAdmin: the count is taken in the transaction
// that writes the change, and bbolt runs one writer at a time, so of two
// admins demoting each other at once the second sees the first's result.
func (db *DB) SetAdmin(ctx context.Context, id string, isAdmin bool) (*accounts.User, error) {
	u, err := db.updateUser(ctx, id, func(tx *bolt.Tx, u *accounts.User) error {
		if u.IsAdmin && !isAdmin {
			if err := keepAnAdmin(tx, u.ID); err != nil {
				return err
			}
		}
		u.IsAdmin = isAdmin
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set admin: %w", err)
	}
	return u, nil
}

// SetGroups replaces a user's groups (deduplicated and sorted), keeping
// the per-group member counts in step.
func (db *DB) SetGroups(ctx context.Context, id string, groups []string) (*accounts.User, error) {
	next := slices.Compact(slices.Sorted(slices.Values(groups)))
	for _, g := range next {
		if err := accountName("group", g); err != nil {
			return nil, fmt.Errorf("set groups: %w", err)
		}
	}
	u, err := db.updateUser(ctx, id, func(tx *bolt.Tx, u *accounts.User) error {
		for _, g := range u.Groups {
			if err := addCount(tx, countGroup(g), -1); err != nil {
				return err
			}
		}
		for _, g := range next {
			if err := addCount(tx, countGroup(g), 1); err != nil {
				return err
			}
		}
		u.Groups = next
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set groups: %w", err)
	}
	return u, nil
}

// Groups lists the groups that have at least one member, sorted.
func (db *DB) Groups(ctx context.Context) ([]string, error) {
	groups := []string{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCounts).Cursor()
		for k, _ := c.Seek(groupCounterPrefix); k != nil && strings.HasPrefix(string(k), string(groupCounterPrefix)); k, _ = c.Next() {
			groups = append(groups, strings.TrimSuffix(string(k[len(groupCounterPrefix):]), "\x00"))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return groups, nil
}

// ProvisionLinkedUser finds or creates the user of an OIDC identity: the
// linked user; else, as rule allows, the user with that email, linked now;
// else newUser, created and linked. One transaction, so two first logins
// at once cannot create two users.
func (db *DB) ProvisionLinkedUser(ctx context.Context, link accounts.AuthLink, email string, newUser *accounts.User, rule accounts.LinkRule) (*accounts.User, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := accountName("provider", link.Provider); err != nil {
		return nil, fmt.Errorf("provision user: %w", err)
	}
	key := joinKey(strPrefix(link.Provider), []byte(link.Subject))
	var u *accounts.User
	err := db.update(ctx, func(tx *bolt.Tx) error {
		links := tx.Bucket(bucketAuthLinks)
		if v := links.Get(key); v != nil {
			var existing accounts.AuthLink
			if err := json.Unmarshal(v, &existing); err != nil {
				return fmt.Errorf("decode auth link: %w", err)
			}
			var err error
			u, err = getUser(tx, existing.UserID)
			return err
		}
		if !rule.EmailVerified {
			return accounts.ErrEmailUnverified
		}
		if id := tx.Bucket(bucketUserByEmail).Get(emailKey(email)); id != nil {
			var err error
			if u, err = getUser(tx, string(id)); err != nil {
				return err
			}
			if u.IsAdmin && !rule.LinkAdmins {
				return accounts.ErrAdminNotLinked
			}
		} else {
			if newUser == nil {
				return fmt.Errorf("no user to create: %w", accounts.ErrInvalidRecord)
			}
			if err := insertUser(tx, newUser); err != nil {
				return err
			}
			u = newUser
		}
		link.UserID = u.ID
		v, err := json.Marshal(link)
		if err != nil {
			return fmt.Errorf("encode auth link: %w", err)
		}
		if err := links.Put(key, v); err != nil {
			return fmt.Errorf("put auth link: %w", err)
		}
		if !slices.Contains(u.OIDCProviders, link.Provider) {
			u.OIDCProviders = append(u.OIDCProviders, link.Provider)
		}
		return putUser(tx, u)
	})
	if err != nil {
		return nil, fmt.Errorf("provision user for %s: %w", link.Provider, err)
	}
	return u, nil
}
