package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// StoredLogin is what `appliance login` keeps for one server: a token pair
// of a password login, or an API key.
type StoredLogin struct {
	Email        string `json:"email,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	APIKey       string `json:"api_key,omitempty"`
}

// bearer is the token a request carries.
func (l StoredLogin) bearer() string {
	if l.APIKey != "" {
		return l.APIKey
	}
	return l.AccessToken
}

// CredentialsFile is credentials.json: logins by server URL, and the
// device cookies the servers gave, by server URL and account. A device
// cookie outlives logout: it proves to the server that this client signed
// in to the account before, so failed logins of strangers do not lock it
// out (api/auth/devices.go).
type CredentialsFile struct {
	Servers map[string]StoredLogin       `json:"servers"`
	Devices map[string]map[string]string `json:"devices,omitempty"`
}

// deviceAccount is the account a device cookie belongs to, as the server
// compares emails.
func deviceAccount(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Device is the device cookie stored for an account of server ("" = none).
func (f *CredentialsFile) Device(server, email string) string {
	return f.Devices[server][deviceAccount(email)]
}

func (f *CredentialsFile) setDevice(server, email, cookie string) {
	if f.Devices == nil {
		f.Devices = map[string]map[string]string{}
	}
	if f.Devices[server] == nil {
		f.Devices[server] = map[string]string{}
	}
	f.Devices[server][deviceAccount(email)] = cookie
}

// CredentialStore is the credentials file in the user config dir
// ($XDG_CONFIG_HOME/appliance/credentials.json on Linux), readable by its
// owner only.
type CredentialStore struct {
	Path string
}

func defaultCredentialStore() (*CredentialStore, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("find the user config dir for credentials: %w", err)
	}
	return &CredentialStore{Path: filepath.Join(dir, "appliance", "credentials.json")}, nil
}

// Load reads the file; a missing file holds no login.
func (s *CredentialStore) Load() (*CredentialsFile, error) {
	f := &CredentialsFile{Servers: map[string]StoredLogin{}}
	raw, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("read credentials %s: %w (delete the file and log in again)", s.Path, err)
	}
	if f.Servers == nil {
		f.Servers = map[string]StoredLogin{}
	}
	return f, nil
}

// Save replaces the file at once (write a temporary file, then rename), so
// a reader never sees half of it; the file is 0600 in a 0700 directory.
func (s *CredentialStore) Save(f *CredentialsFile) error {
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".credentials-*.json")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	return nil
}

// lock serializes the commands that change the file. Refreshes need it
// most: each refresh token works once, and a second use of a rotated one
// revokes the whole login, so two commands must never both refresh it.
func (s *CredentialStore) lock() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return nil, fmt.Errorf("lock credentials: %w", err)
	}
	f, err := os.OpenFile(s.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock credentials: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock credentials: %w", err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// update changes the login of one server under the lock; change returns
// the new login, or nil to forget it.
func (s *CredentialStore) update(server string, change func(cur StoredLogin, ok bool) (*StoredLogin, error)) error {
	return s.edit(func(f *CredentialsFile) error {
		cur, ok := f.Servers[server]
		next, err := change(cur, ok)
		if err != nil {
			return err
		}
		if next == nil {
			delete(f.Servers, server)
		} else {
			f.Servers[server] = *next
		}
		return nil
	})
}

// edit changes the file under the lock.
func (s *CredentialStore) edit(change func(f *CredentialsFile) error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.Load()
	if err != nil {
		return err
	}
	if err := change(f); err != nil {
		return err
	}
	return s.Save(f)
}

// TokenExpiry reads the exp claim of a JWT without checking it (the server
// does); ok is false for anything else, such as an API key.
func TokenExpiry(token string) (time.Time, bool) {
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
