package api_test

import (
	"bytes"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/openapitest"
)

// undocumentedRoutes are the routes the OpenAPI document leaves out on
// purpose, as its info.description says: the UI's catch-all, which serves
// the web pages for every other path and method.
var undocumentedRoutes = map[string]bool{"/*": true}

// echoParam is echo's `:name` path parameter, written `{name}` in OpenAPI.
var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// routeTable is every method and path of a server with every optional part
// on (auth, UI), as OpenAPI would write them.
func routeTable(t *testing.T) map[string]bool {
	t.Helper()
	e := api.New(api.Config{
		Auth: &auth.Config{
			JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
			Providers: map[string]auth.Provider{"local": {Type: auth.ProviderInternal}},
		},
		UI:          http.NotFoundHandler(),
		WorkerToken: workerToken,
	})
	routes := map[string]bool{}
	for _, r := range e.Routes() {
		// Groups with middleware add not-found routes of their own; they
		// answer 404 like any unknown path.
		if r.Method == echo.RouteNotFound || undocumentedRoutes[r.Path] {
			continue
		}
		routes[r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	return routes
}

func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	routes := routeTable(t)
	documented := map[string]bool{}
	for path, item := range doc.Doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	var missing, extra []string
	for r := range routes {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for op := range documented {
		if !routes[op] {
			extra = append(extra, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes missing from api/openapi.yaml (add an operation for each):\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("operations in api/openapi.yaml that are no route of api.New (remove them, or add the route):\n  %s", strings.Join(extra, "\n  "))
	}
	if len(routes) < 40 {
		t.Fatalf("only %d routes found: the route table is not what this test expects", len(routes))
	}
}

// The document is served as JSON without a token even with auth on, like
// /api/config: it describes the interface, nothing the server holds.
func TestOpenAPIDocumentIsServedWithoutAuth(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.api("GET", "/api/workspaces", nil).expect(401)
	r := f.api("GET", "/api/openapi.json", nil).expect(200)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	want, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, want) {
		t.Fatalf("served document differs from api.OpenAPI()")
	}
	doc := r.object()
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	// YAML anchors and merge keys are resolved, not served.
	if bytes.Contains(r.body, []byte(`"<<"`)) {
		t.Fatalf("served document still has a YAML merge key")
	}
}
