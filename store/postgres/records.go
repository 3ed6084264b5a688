package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
)

// Account records are stored as their JSON (the record column) beside
// the columns their lookups need; these read and check them.

// scanRecord decodes the JSON record row holds; no row is notFound,
// naming what was looked up.
func scanRecord[T any](row pgx.Row, what, key string, notFound error) (*T, error) {
	var raw []byte
	if err := row.Scan(&raw); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%s %s: %w", what, key, notFound)
		}
		return nil, fmt.Errorf("read %s %s: %w", what, key, unavailable(err))
	}
	return decodeRecord[T](raw, what, key)
}

func decodeRecord[T any](raw []byte, what, key string) (*T, error) {
	var r T
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", what, key, err)
	}
	return &r, nil
}

// scanRecords decodes every row's record, in the rows' order; never nil.
func scanRecords[T any](rows pgx.Rows, what string) ([]*T, error) {
	out := []*T{}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("read %s: %w", what, unavailable(err))
		}
		r, err := decodeRecord[T](raw, what, "")
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, unavailable(err))
	}
	return out, nil
}

// accountName refuses what a text column cannot hold (a NUL byte, bytes
// that are not UTF-8), as bbolt refuses the NUL that separates its keys:
// accounts.ErrInvalidRecord, not a database error.
func accountName(what, s string) error {
	if !storable(s) {
		return fmt.Errorf("%s %q contains a NUL byte or is not UTF-8: %w", what, s, accounts.ErrInvalidRecord)
	}
	return nil
}

// storable reports whether a text column can hold every s. A lookup of a
// name that is not is answered "not found" without asking the database,
// which would refuse the statement.
func storable(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
