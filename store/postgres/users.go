package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
)

var _ accounts.UserStore = (*DB)(nil)

// defaultUsersLimit is the page of Users when the caller gives none, as
// in the bbolt store.
const defaultUsersLimit = 50

func emailKey(email string) string { return strings.ToLower(email) }

// CreateUser stores a new user; an email already in use, in any letter
// case, is accounts.ErrEmailTaken.
func (db *DB) CreateUser(ctx context.Context, u *accounts.User) error {
	if err := db.audited(ctx, func(q querier) error { return insertUser(ctx, q, u) }); err != nil {
		return fmt.Errorf("create user %s: %w", u.Email, err)
	}
	return nil
}

// insertUser adds u. The unique email index decides a race between two
// sign-ups, whichever transaction they run in.
func insertUser(ctx context.Context, q querier, u *accounts.User) error {
	if u.ID == "" || u.Email == "" {
		return fmt.Errorf("user needs an id and an email: %w", accounts.ErrInvalidRecord)
	}
	if err := accountName("user id", u.ID); err != nil {
		return err
	}
	if err := accountName("email", u.Email); err != nil {
		return err
	}
	for _, g := range u.Groups {
		if err := accountName("group", g); err != nil {
			return err
		}
	}
	rec, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode user: %w", err)
	}
	_, err = q.Exec(ctx, `INSERT INTO users (id, email_key, created_ns, is_admin, groups, record)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		u.ID, emailKey(u.Email), u.CreatedAt.UnixNano(), u.IsAdmin, groupsOf(u), rec)
	switch {
	case violates(err, "users_email_unique"):
		return fmt.Errorf("%s: %w", u.Email, accounts.ErrEmailTaken)
	case violates(err, "users_pkey"):
		return fmt.Errorf("user id %s is already in use: %w", u.ID, accounts.ErrInvalidRecord)
	case err != nil:
		return fmt.Errorf("insert user: %w", err)
	}
	return nil
}

// groupsOf is the user's groups for the NOT NULL array column.
func groupsOf(u *accounts.User) []string {
	if u.Groups == nil {
		return []string{}
	}
	return u.Groups
}

// putUser rewrites a stored user: its record and the columns that follow
// from it (the email never changes).
func putUser(ctx context.Context, tx pgx.Tx, u *accounts.User) error {
	rec, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode user: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE users SET is_admin = $2, groups = $3, record = $4 WHERE id = $1`,
		u.ID, u.IsAdmin, groupsOf(u), rec); err != nil {
		return fmt.Errorf("put user: %w", err)
	}
	return nil
}

func getUser(ctx context.Context, q querier, id string) (*accounts.User, error) {
	if !storable(id) {
		return nil, fmt.Errorf("user %s: %w", id, accounts.ErrUserNotFound)
	}
	return scanRecord[accounts.User](q.QueryRow(ctx, `SELECT record FROM users WHERE id = $1`, id), "user", id, accounts.ErrUserNotFound)
}

// User returns a user by id (accounts.ErrUserNotFound).
func (db *DB) User(ctx context.Context, id string) (*accounts.User, error) {
	return getUser(ctx, db.pool, id)
}

// UserByEmail returns the user with that email, in any letter case
// (accounts.ErrUserNotFound).
func (db *DB) UserByEmail(ctx context.Context, email string) (*accounts.User, error) {
	if !storable(email) {
		return nil, fmt.Errorf("user with email %s: %w", email, accounts.ErrUserNotFound)
	}
	return scanRecord[accounts.User](db.pool.QueryRow(ctx, `SELECT record FROM users WHERE email_key = $1`, emailKey(email)),
		"user with email", email, accounts.ErrUserNotFound)
}

// Users returns a page of users in creation order (then id order), and
// their total, read in one statement so both agree.
func (db *DB) Users(ctx context.Context, limit, offset int) ([]*accounts.User, int, error) {
	if offset < 0 {
		return nil, 0, fmt.Errorf("list users: negative offset %d: %w", offset, accounts.ErrInvalidRecord)
	}
	if limit <= 0 {
		limit = defaultUsersLimit
	}
	// The page joins the total so that a page past the end still carries
	// it (one row, with no record).
	rows, err := db.pool.Query(ctx, `SELECT p.record, c.total
		FROM (SELECT count(*) AS total FROM users) c
		LEFT JOIN LATERAL (SELECT record, created_ns, id FROM users ORDER BY created_ns, id LIMIT $1 OFFSET $2) p ON true
		ORDER BY p.created_ns, p.id`, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var (
		page  []*accounts.User
		total int
	)
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw, &total); err != nil {
			return nil, 0, fmt.Errorf("list users: %w", err)
		}
		if raw == nil {
			continue
		}
		u, err := decodeRecord[accounts.User](raw, "user", "")
		if err != nil {
			return nil, 0, fmt.Errorf("list users: %w", err)
		}
		page = append(page, u)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list users: %w", err)
	}
	return page, total, nil
}

// updateUser applies change to a stored user in one serializable
// transaction and writes it back.
func (db *DB) updateUser(ctx context.Context, id string, change func(tx pgx.Tx, u *accounts.User) error) (*accounts.User, error) {
	var u *accounts.User
	err := db.serializable(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = getUser(ctx, tx, id); err != nil {
			return err
		}
		if err := change(tx, u); err != nil {
			return err
		}
		return putUser(ctx, tx, u)
	})
	return u, err
}

// keepAnAdmin fails with accounts.ErrLastAdmin unless an admin other than
// userID exists. Read in the serializable transaction that demotes or
// deletes: of two admins demoting each other at once, PostgreSQL aborts
// one, and its retry finds the other already demoted.
func keepAnAdmin(ctx context.Context, tx pgx.Tx, userID string) error {
	var other bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE is_admin AND id <> $1)`, userID).Scan(&other); err != nil {
		return fmt.Errorf("count admins: %w", err)
	}
	if !other {
		return accounts.ErrLastAdmin
	}
	return nil
}

// SetAdmin grants or revokes a user's admin status; revoking the last
// admin's is accounts.ErrLastAdmin.
func (db *DB) SetAdmin(ctx context.Context, id string, isAdmin bool) (*accounts.User, error) {
	u, err := db.updateUser(ctx, id, func(tx pgx.Tx, u *accounts.User) error {
		if u.IsAdmin && !isAdmin {
			if err := keepAnAdmin(ctx, tx, u.ID); err != nil {
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

// SetGroups replaces a user's groups (deduplicated and sorted).
func (db *DB) SetGroups(ctx context.Context, id string, groups []string) (*accounts.User, error) {
	next := slices.Compact(slices.Sorted(slices.Values(groups)))
	for _, g := range next {
		if err := accountName("group", g); err != nil {
			return nil, fmt.Errorf("set groups: %w", err)
		}
	}
	u, err := db.updateUser(ctx, id, func(_ pgx.Tx, u *accounts.User) error {
		u.Groups = next
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set groups: %w", err)
	}
	return u, nil
}

// Groups lists the groups that have at least one member, in byte order.
// Users are few, so it reads their group arrays rather than keeping
// counters as bbolt does.
func (db *DB) Groups(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT g COLLATE "C" FROM users, unnest(groups) AS g ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	if groups == nil {
		groups = []string{}
	}
	return groups, nil
}

// ProvisionLinkedUser finds or creates the user of an OIDC identity: the
// linked user; else, as rule allows, the user with that email, linked now;
// else newUser, created and linked. One serializable transaction, so two
// first logins at once cannot create two users: the unique keys (link,
// email) abort the loser, whose retry finds the winner's user.
func (db *DB) ProvisionLinkedUser(ctx context.Context, link accounts.AuthLink, email string, newUser *accounts.User, rule accounts.LinkRule) (*accounts.User, error) {
	if err := accountName("provider", link.Provider); err != nil {
		return nil, fmt.Errorf("provision user: %w", err)
	}
	if err := accountName("subject", link.Subject); err != nil {
		return nil, fmt.Errorf("provision user: %w", err)
	}
	var u *accounts.User
	err := db.serializable(ctx, func(tx pgx.Tx) error {
		u = nil
		var linked string
		err := tx.QueryRow(ctx, `SELECT user_id FROM auth_links WHERE provider = $1 AND subject = $2`, link.Provider, link.Subject).Scan(&linked)
		switch {
		case err == nil:
			u, err = getUser(ctx, tx, linked)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read auth link: %w", err)
		}
		if !rule.EmailVerified {
			return accounts.ErrEmailUnverified
		}
		found, err := userByEmailIn(ctx, tx, email)
		if err != nil {
			return err
		}
		if found != nil {
			if found.IsAdmin && !rule.LinkAdmins {
				return accounts.ErrAdminNotLinked
			}
			u = found
		} else {
			if newUser == nil {
				return fmt.Errorf("no user to create: %w", accounts.ErrInvalidRecord)
			}
			// A copy: a retry starts again from the caller's user.
			nu := *newUser
			nu.OIDCProviders = slices.Clone(newUser.OIDCProviders)
			if err := insertUser(ctx, tx, &nu); err != nil {
				return err
			}
			u = &nu
		}
		l := link
		l.UserID = u.ID
		rec, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("encode auth link: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auth_links (provider, subject, user_id, record) VALUES ($1, $2, $3, $4)`,
			l.Provider, l.Subject, l.UserID, rec); err != nil {
			return fmt.Errorf("put auth link: %w", err)
		}
		if !slices.Contains(u.OIDCProviders, link.Provider) {
			u.OIDCProviders = append(u.OIDCProviders, link.Provider)
		}
		return putUser(ctx, tx, u)
	})
	if err != nil {
		return nil, fmt.Errorf("provision user for %s: %w", link.Provider, err)
	}
	return u, nil
}

// userByEmailIn is the user with that email in tx, or nil.
func userByEmailIn(ctx context.Context, tx pgx.Tx, email string) (*accounts.User, error) {
	if !storable(email) {
		return nil, nil
	}
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT record FROM users WHERE email_key = $1`, emailKey(email)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read user with email %s: %w", email, err)
	}
	return decodeRecord[accounts.User](raw, "user with email", email)
}
