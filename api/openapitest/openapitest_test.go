package openapitest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/api/openapitest"
)

// The api tests rely on Check to fail on answers the document does not
// describe; these are such answers, and a few it does.
func TestCheckRejectsAnswersTheDocumentDoesNotDescribe(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	const job = "/api/jobs/0195f3a4-8c1e-7b2a-9d3e-123456789abc"
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		want               string // "" = valid
	}{
		{"config", "GET", "/api/config", 200, jsonCT,
			`{"auth_required":false,"has_internal_auth":false,"oidc_providers":[],"acl_enabled":false,"version":"1"}`, ""},
		{"config missing a field", "GET", "/api/config", 200, jsonCT,
			`{"auth_required":false,"has_internal_auth":false,"oidc_providers":[],"acl_enabled":false}`, "version"},
		{"config with an undocumented field", "GET", "/api/config", 200, jsonCT,
			`{"auth_required":false,"has_internal_auth":false,"oidc_providers":[],"acl_enabled":false,"version":"1","x":1}`, "x"},
		{"null where a string is required", "GET", "/api/config", 200, jsonCT,
			`{"auth_required":false,"has_internal_auth":false,"oidc_providers":[],"acl_enabled":false,"version":null}`, "version"},
		{"undocumented status", "POST", job + "/cancel", 418, jsonCT, `{"error":"teapot"}`, "status is not supported"},
		{"error body with more fields", "POST", job + "/cancel", 409, jsonCT, `{"error":"ended","code":1}`, "code"},
		{"error body that is not JSON", "GET", job, 404, http.Header{"Content-Type": {"text/plain"}}, "not found", "text/plain"},
		{"job id that is no UUID", "POST", "/api/workspaces/main/tasks/hello/execute", 200, jsonCT, `{"job_id":"nope"}`, "job_id"},
		{"timestamp that is no date-time", "GET", job, 200, jsonCT, `{"job_id":"0195f3a4-8c1e-7b2a-9d3e-123456789abc","workspace":"w","task_name":"t","mode":"distributed","status":"pending","source_type":"api","source_id":null,"revision":"r","created_at":"yesterday","started_at":null,"completed_at":null,"input":{},"output":null,"steps":[]}`, "created_at"},
		{"job detail", "GET", job, 200, jsonCT, `{"job_id":"0195f3a4-8c1e-7b2a-9d3e-123456789abc","workspace":"w","task_name":"t","mode":"distributed","status":"pending","source_type":"api","source_id":null,"revision":"r","created_at":"2025-03-29T12:00:00Z","started_at":null,"completed_at":null,"input":{},"output":null,"steps":[]}`, ""},
		{"cancel answer", "POST", job + "/cancel", 200, jsonCT, `{"status":"cancelled"}`, ""},
		{"cancel answer with another status", "POST", job + "/cancel", 200, jsonCT, `{"status":"running"}`, "status"},
		{"logs", "GET", job + "/logs?tail=5", 200, jsonCT, `{"logs":"","lines":0,"next":0}`, ""},
		{"logs without next", "GET", job + "/logs", 200, jsonCT, `{"logs":"","lines":0}`, "next"},
		{"unknown api path with the error body", "GET", "/api/nope", 404, jsonCT, `{"error":"no such endpoint"}`, ""},
		{"unknown api path answered 200", "GET", "/api/nope", 200, jsonCT, `{}`, "no operation"},
		{"wrong method with a bad body", "DELETE", "/api/jobs", 405, jsonCT, `{"message":"x"}`, "error"},
		{"the UI", "GET", "/jobs/x", 200, http.Header{"Content-Type": {"text/html"}}, "<html>", ""},
		{"claim, no work", "POST", "/worker/jobs/claim", 200, jsonCT, `{"job_id":null,"step_name":null,"action_spec":null}`, ""},
		{"claim, half no work", "POST", "/worker/jobs/claim", 200, jsonCT, `{"job_id":null}`, "doesn't match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := doc.Check(c.method, c.path, c.status, c.header, []byte(c.body))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("want an error mentioning %q, got none", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error does not mention %q: %v", c.want, err)
			}
		})
	}
}
