package api_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
)

func TestErrorMapperGivesOneJSONShapePerKind(t *testing.T) {
	e := api.New(api.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tests := []struct {
		name    string
		handler echo.HandlerFunc
		status  int
		message string
	}{
		{"not found", fail(fmt.Errorf("job 42: %w", engine.ErrNotFound)), 404, "job 42: not found"},
		{"conflict", fail(fmt.Errorf("job is completed: %w", engine.ErrConflict)), 409, "job is completed: conflict"},
		{"invalid", fail(fmt.Errorf("%w: input.name is required", engine.ErrInvalid)), 400, "invalid input: input.name is required"},
		{"stopped", fail(fmt.Errorf("create job: %w", engine.ErrStopped)), 503, "server is shutting down"},
		{"archive down", fail(fmt.Errorf("read log of job x: %w: the log archive did not answer: %w", engine.ErrUnavailable, errors.New("dial tcp: connection refused"))), 503, "the job's log is in the archive, which did not answer: try again later"},
		{"database away", fail(fmt.Errorf("find the job of an idempotency key: %w: %w", engine.ErrDatabaseUnavailable, errors.New("dial unix /run/pg: connection refused"))), 503, "the database did not answer (restarting?): try again in a few seconds"},
		{"user not found", fail(fmt.Errorf("user 7: %w", accounts.ErrUserNotFound)), 404, "user 7: user not found"},
		{"api key not found", fail(fmt.Errorf("appk_123: %w", accounts.ErrAPIKeyNotFound)), 404, "appk_123: api key not found"},
		{"email taken", fail(fmt.Errorf("create user: %w", accounts.ErrEmailTaken)), 409, "a user with this email already exists"},
		{"last admin", fail(fmt.Errorf("set admin: %w", accounts.ErrLastAdmin)), 409, "the server must keep at least one admin: make another user admin first"},
		{"invalid account record", fail(fmt.Errorf("group %q: %w", "a\x00b", accounts.ErrInvalidRecord)), 400, `group "a\x00b": invalid account record`},
		{"echo error keeps its code", fail(echo.NewHTTPError(http.StatusTeapot, "short and stout")), 418, "short and stout"},
		{"anything else hides its details", fail(errors.New("disk on fire at /var/secret")), 500, "internal server error"},
		{"panic", func(echo.Context) error { panic("boom") }, 500, "internal server error"},
	}
	for _, tt := range tests {
		e.GET("/test/"+tt.name, tt.handler)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	f := &fixture{t: t, url: srv.URL, client: srv.Client()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.in(t).api("GET", "/test/"+tt.name, nil).expect(tt.status)
			if msg := r.errorMessage(); msg != tt.message {
				t.Fatalf("error %q, want %q", msg, tt.message)
			}
		})
	}
	// The server survives the panic.
	f.api("GET", "/healthz", nil).expect(200)
}

func fail(err error) echo.HandlerFunc { return func(echo.Context) error { return err } }
