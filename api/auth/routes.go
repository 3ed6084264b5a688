package auth

import (
	"sort"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/wire"
)

// Routes adds the auth and admin endpoints to g, the /api group. Without
// auth they are not routes at all, so they answer 404 like any unknown
// path.
func (a *Service) Routes(g *echo.Group) {
	r := g.Group("/auth")
	r.POST("/login", a.login)
	r.POST("/refresh", a.refresh)
	r.POST("/logout", a.logout)
	r.GET("/me", a.me)
	r.POST("/api-keys", a.createAPIKey)
	r.GET("/api-keys", a.listAPIKeys)
	r.DELETE("/api-keys/:prefix", a.deleteAPIKey)
	r.GET("/oidc/:provider", a.oidcStart)
	r.GET("/oidc/:provider/callback", a.oidcCallback)

	r.PUT("/me/password", a.changeOwnPassword)

	g.GET("/users", a.listUsers, a.requireAdmin)
	g.POST("/users", a.createUser, a.requireAdmin)
	g.GET("/users/:id", a.getUser, a.requireAdmin)
	g.DELETE("/users/:id", a.deleteUser, a.requireAdmin)
	g.PUT("/users/:id/password", a.setPassword, a.requireAdmin)
	g.PUT("/users/:id/admin", a.setAdmin, a.requireAdmin)
	g.PUT("/users/:id/groups", a.setGroups, a.requireAdmin)
	g.GET("/groups", a.listGroups, a.requireAdmin)
}

// HasInternal reports whether users may sign in with email and password.
func (a *Service) HasInternal() bool {
	for _, p := range a.cfg.Providers {
		if p.Type == ProviderInternal {
			return true
		}
	}
	return false
}

// OIDCLogins are the OIDC providers a user may sign in with, by id.
func (a *Service) OIDCLogins() []wire.OIDCProvider {
	out := []wire.OIDCProvider{}
	for id, p := range a.cfg.Providers {
		if p.Type == ProviderOIDC {
			name := p.DisplayName
			if name == "" {
				name = id
			}
			out = append(out, wire.OIDCProvider{ID: id, DisplayName: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
