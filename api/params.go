package api

import (
	"math"
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/labstack/echo/v4"
)

// waitParam reads a `wait` query parameter in seconds (fractions allowed),
// defaulting to def and capped at max.
func waitParam(c echo.Context, def, max time.Duration) (time.Duration, error) {
	v := c.QueryParam("wait")
	if v == "" {
		return min(def, max), nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return 0, httpx.BadRequest("wait must be a non-negative number of seconds, got %q", v)
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
	if !httpx.IsUUID(id) {
		return "", httpx.NotFound("job %q", id)
	}
	return id, nil
}
