package app

import "time"

// HTTP server bounds (DESIGN.md "Safe by default"). The request body
// limit is limits.request_body; the body read timeout and the JSON 431
// are enforced per request by the api package.
const (
	defaultHeaderTimeout = 10 * time.Second
	bodyReadTimeout      = 60 * time.Second
	idleTimeout          = 120 * time.Second
	// maxHeaderBytes is the request header limit, answered with a JSON 431.
	maxHeaderBytes = 64 << 10
	// netHTTPMaxHeaderBytes is net/http's own cap, above ours so that a
	// client normally gets the JSON answer; past it net/http answers a
	// plain-text 431 and closes the connection.
	netHTTPMaxHeaderBytes = 1 << 20
)
