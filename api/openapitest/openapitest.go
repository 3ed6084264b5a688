// Package openapitest checks HTTP answers against appliance's OpenAPI
// document (api.OpenAPI) with kin-openapi, for tests: wrap a test client's
// transport with Transport and every answer it receives is validated.
// A test helper: it must not import store, app or runners.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/appliance-sh/appliance/api"
)

// routingBase is the server URL requests are matched under: the document
// says `/`, and tests' servers listen on ports of their own.
const routingBase = "http://appliance.test"

// Document is the parsed and validated OpenAPI document.
type Document struct {
	Doc    *openapi3.T
	router routers.Router
}

// Load parses api.OpenAPI once and checks it is a valid OpenAPI document.
var Load = sync.OnceValues(func() (*Document, error) {
	data, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	// An event stream's body is text that never ends: checked as a string
	// (the transport leaves it unread).
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("OpenAPI document is invalid: %w", err)
	}
	routed := *doc
	routed.Servers = openapi3.Servers{{URL: routingBase}}
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("route OpenAPI document: %w", err)
	}
	return &Document{Doc: doc, router: router}, nil
})

// Transport validates every answer that passes through base (nil =
// http.DefaultTransport). An answer the document does not describe makes
// the round trip fail with an error saying why, so the test that sent the
// request fails where it sent it.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	doc, err := Load()
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	var body []byte
	// The body of a 101 is the WebSocket, and that of an event stream
	// never ends: only their status and headers are checked.
	streaming := resp.StatusCode == http.StatusSwitchingProtocols ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if !streaming {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err := doc.CheckResponse(req, resp, body); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// CheckResponse is Check for a request sent and the answer to it, whose
// body the caller has read.
func (d *Document) CheckResponse(req *http.Request, resp *http.Response, body []byte) error {
	path := req.URL.EscapedPath()
	if req.URL.RawQuery != "" {
		path += "?" + req.URL.RawQuery
	}
	if err := d.Check(req.Method, path, resp.StatusCode, resp.Header, body); err != nil {
		return fmt.Errorf("answer does not match the OpenAPI document (api/openapi.yaml): %w", err)
	}
	return nil
}

// Check validates one answer: the operation the request reached is in the
// document, the status is one it lists, and headers and body match the
// schemas. A request no operation takes must have got a 4xx with the error
// body (404, 405, or the middleware's refusal), except the UI's pages and CORS preflights, which the
// document leaves out (see its info.description).
func (d *Document) Check(method, pathAndQuery string, status int, header http.Header, body []byte) error {
	req, err := http.NewRequest(method, routingBase+pathAndQuery, nil)
	if err != nil {
		return err
	}
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		return d.checkUnrouted(req, status, header, body, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s (operation %s) answered %d: %w; body: %.500s",
			method, pathAndQuery, route.Operation.OperationID, status, err, body)
	}
	return nil
}

func (d *Document) checkUnrouted(req *http.Request, status int, header http.Header, body []byte, routeErr error) error {
	p := req.URL.Path
	switch {
	case !api.IsAPIPath(p):
		return nil // the UI
	case req.Method == http.MethodOptions && status == http.StatusNoContent:
		return nil // a CORS preflight
	case req.Method == http.MethodHead:
		return nil // no body to check
	case status < 400 || status >= 500:
		// 404 or 405 mostly; the middleware may refuse first (401, 421).
		return fmt.Errorf("%s %s answered %d but no operation of the document takes it (%v)", req.Method, p, status, routeErr)
	}
	return d.CheckError(header, body)
}

// CheckError validates an error answer: JSON, exactly {"error": "..."}.
func (d *Document) CheckError(header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("error answer has Content-Type %q, want application/json", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("error answer is not JSON: %w: %.200s", err, body)
	}
	schema := d.Doc.Components.Schemas["Error"]
	if schema == nil || schema.Value == nil {
		return errors.New("the document has no components.schemas.Error")
	}
	if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("error answer %s: %w", body, err)
	}
	return nil
}
