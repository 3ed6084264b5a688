package config

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/audit"
)

// DefaultAuditHeadEvery: the server logs the audit chain's head every
// this many entries (and at shutdown).
const DefaultAuditHeadEvery = 1000

// AuditKeyEnv is the environment variable that may hold audit.key.
const AuditKeyEnv = "APPLIANCE_AUDIT_KEY"

// Audit is the audit section:
//
//	audit:
//	  key: ${APPLIANCE_AUDIT_KEY}   # the chain's HMAC key, at least 16 bytes; never stored in the database
//	  head_every: 1000              # log the chain's head every N entries
//	  retention: 8760h              # drop entries older than this, from the front (unset: keep all)
//
// Without a key (neither here nor in APPLIANCE_AUDIT_KEY) the server
// generates one into data_dir/audit.key on its first start and warns: the
// chain then holds against whoever can write the database but not read
// that file. Replicas of one PostgreSQL database (ha) sign one chain, so
// they need one key: without audit.key they derive it from ha.peer_secret,
// which they share already (and keep out of the database too).
type Audit struct {
	Key       string `yaml:"key"`
	HeadEvery int    `yaml:"head_every"`
	Retention string `yaml:"retention"`
}

// AuditKeyFile is where a generated key is kept.
func (c *Server) AuditKeyFile() string { return filepath.Join(c.DataDir, "audit.key") }

func (c *Server) validateAudit() error {
	a := &c.Audit
	if a.Key == "" {
		a.Key = os.Getenv(AuditKeyEnv)
	}
	if a.Key != "" && len(a.Key) < audit.MinKeyLen {
		return fmt.Errorf("audit.key: %d bytes, want at least %d (e.g. `openssl rand -hex 32`)", len(a.Key), audit.MinKeyLen)
	}
	if a.HeadEvery < 0 {
		return fmt.Errorf("audit.head_every: must be 1 or more, got %d", a.HeadEvery)
	}
	if a.HeadEvery == 0 {
		a.HeadEvery = DefaultAuditHeadEvery
	}
	if a.Retention != "" {
		if _, err := positiveDuration("audit.retention", a.Retention, 0); err != nil {
			return err
		}
	}
	return nil
}

// AuditRetention is how long entries are kept; 0 forever.
func (c *Server) AuditRetention() time.Duration {
	d, _ := positiveDuration("audit.retention", c.Audit.Retention, 0)
	return d
}

// AuditKey returns the chain's key: audit.key, or the key generated into
// data_dir (made now if there is none; generated reports that). A
// command reading a stopped server's store (audit verify) passes create
// false: it must never make a key the chain was not signed with.
func (c *Server) AuditKey(create bool) (key audit.Key, generated bool, err error) {
	if c.Audit.Key != "" {
		return audit.Key(c.Audit.Key), false, nil
	}
	if c.HA.Enabled() && c.HA.PeerSecret != "" {
		m := hmac.New(sha256.New, []byte(c.HA.PeerSecret))
		m.Write([]byte("appliance audit key"))
		return audit.Key(hex.EncodeToString(m.Sum(nil))), false, nil
	}
	path := c.AuditKeyFile()
	data, err := os.ReadFile(path)
	if err == nil {
		k := strings.TrimSpace(string(data))
		if len(k) < audit.MinKeyLen {
			return nil, false, fmt.Errorf("audit key file %s: %d bytes, want at least %d", path, len(k), audit.MinKeyLen)
		}
		return audit.Key(k), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) || !create {
		return nil, false, fmt.Errorf("audit key: no audit.key in the config or %s, and %w", AuditKeyEnv, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, false, fmt.Errorf("generate an audit key: %w", err)
	}
	k := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, false, fmt.Errorf("generate an audit key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("generate an audit key: %w", err)
	}
	if _, err := f.WriteString(k + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("generate an audit key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("generate an audit key: %w", err)
	}
	return audit.Key(k), true, nil
}
