package api

import (
	"sort"

	"github.com/labstack/echo/v4"
)

// authRoutes adds the auth and admin endpoints when auth is on. Without
// it they are not routes at all, so they answer 404 like any unknown path.
func (s *server) authRoutes(e *echo.Echo) {
	if s.cfg.Auth == nil {
		return
	}
	s.auth = newAuthService(s.cfg.Auth, s.cfg.Users, s.log)

	a := e.Group("/api/auth")
	a.POST("/login", s.login)
	a.POST("/refresh", s.refresh)
	a.POST("/logout", s.logout)
	a.GET("/me", s.me)
	a.POST("/api-keys", s.createAPIKey)
	a.GET("/api-keys", s.listAPIKeys)
	a.DELETE("/api-keys/:prefix", s.deleteAPIKey)
	a.GET("/oidc/:provider", s.oidcStart)
	a.GET("/oidc/:provider/callback", s.oidcCallback)

	a.PUT("/me/password", s.changeOwnPassword)

	e.GET("/api/users", s.listUsers, s.requireAdmin)
	e.POST("/api/users", s.createUser, s.requireAdmin)
	e.GET("/api/users/:id", s.getUser, s.requireAdmin)
	e.DELETE("/api/users/:id", s.deleteUser, s.requireAdmin)
	e.PUT("/api/users/:id/password", s.setPassword, s.requireAdmin)
	e.PUT("/api/users/:id/admin", s.setAdmin, s.requireAdmin)
	e.PUT("/api/users/:id/groups", s.setGroups, s.requireAdmin)
	e.GET("/api/groups", s.listGroups, s.requireAdmin)
}

// describeAuth fills in the auth part of GET /api/config.
func (s *server) describeAuth(r *configResponse) {
	if s.auth == nil {
		return
	}
	r.AuthRequired = true
	r.ACLEnabled = s.cfg.ACL != nil
	r.HasInternalAuth = s.auth.hasInternal()
	for id, p := range s.cfg.Auth.Providers {
		if p.Type == ProviderOIDC {
			name := p.DisplayName
			if name == "" {
				name = id
			}
			r.OIDCProviders = append(r.OIDCProviders, oidcProvider{ID: id, DisplayName: name})
		}
	}
	sort.Slice(r.OIDCProviders, func(i, j int) bool { return r.OIDCProviders[i].ID < r.OIDCProviders[j].ID })
}
