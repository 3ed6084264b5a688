package api

import (
	"math"
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

// page reads `limit` and `offset`; limit is capped rather than refused so a
// client asking for "everything" still gets a useful page.
func page(c echo.Context) (limit, offset int, err error) {
	limit, offset = defaultPageLimit, 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, badRequest("limit must be a positive integer, got %q", v)
		}
		limit = min(n, maxPageLimit)
	}
	if v := c.QueryParam("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, badRequest("offset must be a non-negative integer, got %q", v)
		}
		offset = n
	}
	return limit, offset, nil
}

// waitParam reads a `wait` query parameter in seconds (fractions allowed),
// defaulting to def and capped at max.
func waitParam(c echo.Context, def, max time.Duration) (time.Duration, error) {
	v := c.QueryParam("wait")
	if v == "" {
		return min(def, max), nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return 0, badRequest("wait must be a non-negative number of seconds, got %q", v)
	}
	if secs >= max.Seconds() {
		return max, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// jobIDParam returns the `id` path parameter; an id that is not a UUID
// names no job, so it is a 404 without asking the engine.
func jobIDParam(c echo.Context) (string, error) {
	id := c.Param("id")
	if !isUUID(id) {
		return "", notFound("job %q", id)
	}
	return id, nil
}

// isUUID accepts only the canonical 36-character form the server issues.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}
