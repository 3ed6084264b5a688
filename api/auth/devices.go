package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// Device cookies (OWASP's "device cookie" pattern against lockout): a
// successful password login leaves its client a cookie that proves it
// signed in to that account before. A later login carrying it is judged by
// the device's own failure budget instead of the account's, so a stranger
// who spends an account's budget on purpose locks out every client
// without the cookie, never its owner's. The cookie grants nothing else: it
// is not a credential, and a password is still needed.
//
// Its value is nonce.mac: 16 random bytes, and the HMAC-SHA256 of the
// account (its email as logins compare it) and the nonce under a key
// derived from the JWT secret. So it cannot be forged, and one issued for
// another account, or tampered with, is no cookie at all. Rotating
// jwt_secret forgets every device.
const (
	deviceCookieName = "appliance_device"
	// deviceCookieTTL is how long a client keeps the cookie; every
	// password login renews it.
	deviceCookieTTL = 400 * 24 * time.Hour // the longest browsers keep one
	deviceNonceLen  = 16
)

// devices issues and checks device cookies.
type devices struct {
	key []byte
}

func newDevices(jwtSecret []byte) devices {
	m := hmac.New(sha256.New, jwtSecret)
	m.Write([]byte("appliance device cookie v1"))
	return devices{key: m.Sum(nil)}
}

func (d devices) mac(account string, nonce []byte) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(account))
	m.Write([]byte{0})
	m.Write(nonce)
	return m.Sum(nil)
}

// issue returns a new device cookie value for account.
func (d devices) issue(account string) (string, error) {
	nonce := make([]byte, deviceNonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(nonce) + "." + enc.EncodeToString(d.mac(account, nonce)), nil
}

// device is the id of the device whose cookie r carries for account, or ""
// when it carries none that is valid for that account.
func (d devices) device(r *http.Request, account string) string {
	c, err := r.Cookie(deviceCookieName)
	if err != nil {
		return ""
	}
	n, m, ok := strings.Cut(c.Value, ".")
	enc := base64.RawURLEncoding
	nonce, err1 := enc.DecodeString(n)
	mac, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || len(nonce) != deviceNonceLen || !hmac.Equal(mac, d.mac(account, nonce)) {
		return ""
	}
	return account + "\x00" + n
}

// cookie is the Set-Cookie of a device cookie value: HttpOnly (no script
// reads it), SameSite=Strict (no other site's page sends it), Secure when
// the server is reached over TLS, and sent only to the auth endpoints.
func (d devices) cookie(r *http.Request, value, baseURL string) *http.Cookie {
	return &http.Cookie{
		Name:     deviceCookieName,
		Value:    value,
		Path:     "/api/auth/",
		MaxAge:   int(deviceCookieTTL / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil || strings.HasPrefix(strings.ToLower(baseURL), "https://"),
		SameSite: http.SameSiteStrictMode,
	}
}
