package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The credentials file the CLI keeps, as the tests read and write it
// (app's credentials.go is the CLI's own side).

type storedLogin struct {
	Email        string `json:"email,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	APIKey       string `json:"api_key,omitempty"`
}

type credentialsFile struct {
	Servers map[string]storedLogin       `json:"servers"`
	Devices map[string]map[string]string `json:"devices,omitempty"`
}

// device is the device cookie stored for an account of server ("" = none).
func (f *credentialsFile) device(server, email string) string {
	return f.Devices[server][strings.ToLower(strings.TrimSpace(email))]
}

type credentialStore struct {
	path string
}

// load reads the file; a missing file holds no login.
func (s *credentialStore) load() (*credentialsFile, error) {
	f := &credentialsFile{Servers: map[string]storedLogin{}}
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	return f, json.Unmarshal(raw, f)
}

// save writes the file as the CLI does: 0600 in a 0700 directory.
func (s *credentialStore) save(f *credentialsFile) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(s.path, append(raw, '\n'), 0o600)
}

// tokenExpiry reads the exp claim of a JWT without checking it; ok is
// false for anything else, such as an API key.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}
