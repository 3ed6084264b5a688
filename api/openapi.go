package api

import (
	_ "embed"
	"fmt"
	"net/http"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/labstack/echo/v4"
)

// openapiYAML is the OpenAPI 3.1 description of every route New adds,
// written as YAML to be read and edited by people (anchors keep the shared
// error statuses in one place) and served as JSON.
//
//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the OpenAPI document as JSON, converted once from the
// embedded YAML (anchors and merge keys resolved).
func OpenAPI() ([]byte, error) { return openapiJSON() }

var openapiJSON = sync.OnceValues(func() ([]byte, error) {
	doc, err := yaml.YAMLToJSON(openapiYAML)
	if err != nil {
		return nil, fmt.Errorf("convert api/openapi.yaml to JSON: %w", err)
	}
	return doc, nil
})

// getOpenAPI serves GET /api/openapi.json; like /api/config it needs no
// token: it describes the interface, not anything the server holds.
func (s *server) getOpenAPI(c echo.Context) error {
	doc, err := OpenAPI()
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, doc)
}

// IsAPIPath reports whether p belongs to the API rather than the UI: the
// UI's catch-all never answers it. The OpenAPI document describes exactly
// these paths; openapitest uses this to tell a UI page from an API answer.
func IsAPIPath(p string) bool { return isAPIPath(p) }
