package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
)

// The one table of what an API key's scopes allow (DESIGN.md "Scoped API
// keys"): every authenticated /api route and every MCP tool, with the
// scope it needs. Both /api (requireScope) and /mcp (its tool list and
// calls) read it; the README's table says the same, and
// TestEveryRouteHasAScope keeps it complete. A scope only narrows: the
// user's admin flag and the ACL still apply on top.

// routeScopes maps "METHOD path" (echo's route path) to its scope.
// mcpRoute needs none of its own: each tool call is checked.
var routeScopes = map[string]accounts.Scope{
	"GET /api/workspaces":                          accounts.ScopeRead,
	"GET /api/workspaces/:ws/tasks":                accounts.ScopeRead,
	"GET /api/workspaces/:ws/tasks/:name":          accounts.ScopeRead,
	"GET /api/workspaces/:ws/triggers":             accounts.ScopeRead,
	"GET /api/jobs":                                accounts.ScopeRead,
	"GET /api/jobs/:id":                            accounts.ScopeRead,
	"GET /api/jobs/:id/steps":                      accounts.ScopeRead,
	"GET /api/jobs/:id/logs":                       accounts.ScopeRead,
	"GET /api/jobs/:id/steps/:step/logs":           accounts.ScopeRead,
	"GET /api/jobs/:id/logs/stream":                accounts.ScopeRead,
	"GET /api/events":                              accounts.ScopeRead,
	"GET /api/workers":                             accounts.ScopeRead,
	"GET /api/queues":                              accounts.ScopeRead,
	"GET /api/workers/:id":                         accounts.ScopeRead,
	"GET /api/auth/me":                             accounts.ScopeRead,
	"GET /api/auth/api-keys":                       accounts.ScopeRead,
	"POST /api/workspaces/:ws/tasks/:name/execute": accounts.ScopeRun,
	"POST /api/jobs/:id/cancel":                    accounts.ScopeRun,
	"POST /api/jobs/:id/priority":                  accounts.ScopeAdmin,
	"POST /api/jobs/:id/rerun":                     accounts.ScopeRun,
	"POST /api/jobs/:id/steps/:step/approve":       accounts.ScopeApprove,
	// Credentials and accounts: a key that may only read or run cannot
	// revoke keys, change its user's password or manage users.
	"POST /api/auth/api-keys":           accounts.ScopeAdmin,
	"DELETE /api/auth/api-keys/:prefix": accounts.ScopeAdmin,
	"PUT /api/auth/me/password":         accounts.ScopeAdmin,
	"GET /api/users":                    accounts.ScopeAdmin,
	"POST /api/users":                   accounts.ScopeAdmin,
	"GET /api/users/:id":                accounts.ScopeAdmin,
	"DELETE /api/users/:id":             accounts.ScopeAdmin,
	"PUT /api/users/:id/password":       accounts.ScopeAdmin,
	"PUT /api/users/:id/admin":          accounts.ScopeAdmin,
	"PUT /api/users/:id/groups":         accounts.ScopeAdmin,
	"GET /api/groups":                   accounts.ScopeAdmin,
	"GET /api/audit":                    accounts.ScopeAdmin,
}

// toolScopes maps each MCP tool to its scope: the scope of the route it
// stands for.
var toolScopes = map[string]accounts.Scope{
	toolListWorkspaces:   routeScopes["GET /api/workspaces"],
	toolListTasks:        routeScopes["GET /api/workspaces/:ws/tasks"],
	toolGetTask:          routeScopes["GET /api/workspaces/:ws/tasks/:name"],
	toolExecuteTask:      routeScopes["POST /api/workspaces/:ws/tasks/:name/execute"],
	toolListJobs:         routeScopes["GET /api/jobs"],
	toolGetJob:           routeScopes["GET /api/jobs/:id"],
	toolGetJobLogs:       routeScopes["GET /api/jobs/:id/logs"],
	toolCancelJob:        routeScopes["POST /api/jobs/:id/cancel"],
	toolRerunJob:         routeScopes["POST /api/jobs/:id/rerun"],
	toolDecideApproval:   routeScopes["POST /api/jobs/:id/steps/:step/approve"],
	toolValidateWorkflow: accounts.ScopeRead, // reads the files it is given, touches nothing
	toolListWorkers:      routeScopes["GET /api/workers"],
}

// RouteScopes and ToolScopes are the table, for the tests and the docs.
func RouteScopes() map[string]accounts.Scope { return routeScopes }
func ToolScopes() map[string]accounts.Scope  { return toolScopes }

// scopeOf is the scope a route needs; a route the table forgets needs
// admin, so an omission fails closed.
func scopeOf(method, path string) accounts.Scope {
	if s, ok := routeScopes[method+" "+path]; ok {
		return s
	}
	return accounts.ScopeAdmin
}

// missingScope is the 403 of a request beyond its key's scopes, naming
// the scope it lacks.
func missingScope(p *auth.Principal, need accounts.Scope, what string) error {
	return echo.NewHTTPError(http.StatusForbidden,
		"this api key lacks the \""+string(need)+"\" scope, which "+what+" needs (its scopes: "+accounts.ScopeNames(p.Scopes())+"); create a key with that scope")
}

// requireScope refuses a request its caller's key has no scope for.
func requireScope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := auth.Caller(c)
		if p == nil || c.Path() == mcpRoute {
			return next(c)
		}
		need := scopeOf(c.Request().Method, c.Path())
		if !p.Allows(need) {
			return missingScope(p, need, c.Request().Method+" "+c.Path())
		}
		return next(c)
	}
}
