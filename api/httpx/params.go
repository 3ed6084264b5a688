package httpx

import (
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// Page sizes of the list endpoints.
const (
	defaultPageLimit = 50
	maxPageLimit     = 500
)

// Page reads `limit` and `offset`; limit is capped rather than refused so a
// client asking for "everything" still gets a useful page.
func Page(c echo.Context) (limit, offset int, err error) {
	limit, offset = defaultPageLimit, 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, BadRequest("limit must be a positive integer, got %q", v)
		}
		limit = min(n, maxPageLimit)
	}
	if v := c.QueryParam("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, BadRequest("offset must be a non-negative integer, got %q", v)
		}
		offset = n
	}
	return limit, offset, nil
}

// IsUUID accepts only the canonical 36-character form the server issues.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// UTCPtr is t in UTC (nil stays nil).
func UTCPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// NonNil is s, or an empty slice for nil (a JSON [] rather than null).
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
