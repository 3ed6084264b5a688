package wire

import "time"

// Error is every error answer: one field, as the interface fixes.
type Error struct {
	Error string `json:"error"`
}

// Config is GET /api/config: how to sign in, and the server's version.
type Config struct {
	AuthRequired    bool           `json:"auth_required"`
	HasInternalAuth bool           `json:"has_internal_auth"`
	OIDCProviders   []OIDCProvider `json:"oidc_providers"`
	ACLEnabled      bool           `json:"acl_enabled"`
	Version         string         `json:"version"`
	HA              *HAStatus      `json:"ha,omitempty"`
}

// HAStatus says, with two replicas on one database, which answered and
// which leads.
type HAStatus struct {
	Replica string `json:"replica"` // the answering replica's advertise_url
	Leader  string `json:"leader"`  // the leader's, "" during a failover
	Leading bool   `json:"leading"`
}

// OIDCProvider is a sign-in provider Config lists.
type OIDCProvider struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
}

// Health is /healthz's and /readyz's answer.
type Health struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Leader is a follower's answer to /readyz: where the leader is.
	Leader *string `json:"leader,omitempty"`
}

// HookAccepted is a webhook's async answer, and (with status and output)
// the sync one.
type HookAccepted struct {
	JobID   string `json:"job_id"`
	Trigger string `json:"trigger"`
	Task    string `json:"task"`
}

// HookResult is a sync webhook's answer once its job ended.
type HookResult struct {
	HookAccepted
	Status string         `json:"status"`
	Output map[string]any `json:"output"`
}

// HookJob is the webhook status endpoint's answer.
type HookJob struct {
	HookResult
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
}
