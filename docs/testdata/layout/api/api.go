// Package api imports a part of the wiring, and net/http (allowed here).
package api

import (
	_ "net/http"

	_ "example.com/layout/app/wiring"
	_ "example.com/layout/engine"
)
