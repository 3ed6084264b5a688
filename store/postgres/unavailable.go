package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/appliance-sh/appliance/engine"
)

// unavailable marks err engine.ErrDatabaseUnavailable when it is the
// database not answering rather than refusing: no connection (refused,
// the server starting or shutting down), a session cut by a restart
// (SQLSTATE class 57P: admin or crash shutdown; class 08: connection
// exception) or the network breaking under a query. A caller can retry
// those, so the API answers 503 with Retry-After, not 500.
func unavailable(err error) error {
	if err == nil || errors.Is(err, engine.ErrDatabaseUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", engine.ErrDatabaseUnavailable, err)
}

// unreachable is stricter than connectionLost (which a caller that knows
// the statement reached the pool uses): a scan or encoding error is not
// the database being away.
func unreachable(err error) bool {
	var (
		pe *pgconn.PgError
		ce *pgconn.ConnectError
		ne net.Error
	)
	switch {
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
