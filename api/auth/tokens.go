package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token lifetimes (spec "Limits").
const (
	accessTokenTTL  = 15 * time.Minute
	refreshTokenTTL = 30 * 24 * time.Hour
)

// API key shape: a fixed 5-character prefix, then 32 random hex characters.
const (
	apiKeyPrefix    = "appk_"
	apiKeyLen       = len(apiKeyPrefix) + 32
	apiKeyShownLen  = 8 // the listed `prefix`
	refreshTokenLen = 32
)

// accessClaims are the claims of an access token: sub is the user id, adm
// the admin flag at issue time (informational: requests check the stored
// user, so a revoked admin loses access at once).
type accessClaims struct {
	Email string `json:"email"`
	Admin bool   `json:"adm"`
	// Family is the refresh token family (the login) the token was issued
	// under: a request checks that the login is still live, and a token
	// without one is refused.
	Family string `json:"sid,omitempty"`
	jwt.RegisteredClaims
}

// issueAccessToken signs an HS256 access token for u under the login
// family, valid 15 minutes unless configured otherwise.
func (a *Service) issueAccessToken(u *User, family string) (string, error) {
	now := a.now()
	ttl := accessTokenTTL
	if a.cfg.AccessTokenTTL > 0 {
		ttl = a.cfg.AccessTokenTTL
	}
	claims := accessClaims{
		Email:  u.Email,
		Admin:  u.IsAdmin,
		Family: family,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   u.ID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.cfg.JWTSecret)
	if err != nil {
		return "", fmt.Errorf("sign access token: %w", err)
	}
	return signed, nil
}

// parseAccessToken verifies signature, algorithm and expiry and returns the
// claims, the user id in Subject.
func (a *Service) parseAccessToken(token string) (*accessClaims, error) {
	var claims accessClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.cfg.JWTSecret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
	)
	if err != nil {
		return nil, fmt.Errorf("parse access token: %w", err)
	}
	if claims.Subject == "" {
		return nil, errors.New("parse access token: no subject")
	}
	return &claims, nil
}

// randomBytes reads n bytes from the system's CSPRNG.
func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("read random bytes: %w", err)
	}
	return b, nil
}

// newRefreshToken returns a fresh refresh token (32 random bytes,
// unpadded base64url) and its stored form, in family (set by the store
// when empty: a rotation passes the old token's family on).
func (a *Service) newRefreshToken(userID, family string) (string, *RefreshToken, error) {
	b, err := randomBytes(refreshTokenLen)
	if err != nil {
		return "", nil, fmt.Errorf("new refresh token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	now := a.now()
	return token, &RefreshToken{
		Hash:      a.refreshHash(token),
		UserID:    userID,
		Family:    family,
		CreatedAt: now,
		ExpiresAt: now.Add(refreshTokenTTL),
	}, nil
}

// newFamilyID names a new login's refresh token family.
func newFamilyID() (string, error) {
	b, err := randomBytes(16)
	if err != nil {
		return "", fmt.Errorf("new login id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// refreshHash is how a refresh token is stored: HMAC-SHA256 keyed with the
// refresh secret over the token's SHA-256. Without the secret, rows of a
// copied database cannot be matched to tokens or forged.
func (a *Service) refreshHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, a.cfg.RefreshSecret)
	mac.Write(sum[:])
	return hex.EncodeToString(mac.Sum(nil))
}

// newAPIKey returns a fresh key: apiKeyPrefix and 16 random bytes in hex.
func newAPIKey() (string, error) {
	b, err := randomBytes((apiKeyLen - len(apiKeyPrefix)) / 2)
	if err != nil {
		return "", fmt.Errorf("new api key: %w", err)
	}
	return apiKeyPrefix + hex.EncodeToString(b), nil
}

// apiKeyHash is the stored form of an API key: its hex SHA-256.
func apiKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// isAPIKey tells an API key from a JWT by its fixed prefix (a JWT starts
// with base64 of `{"`, never with an underscore-terminated word).
func isAPIKey(token string) bool { return strings.HasPrefix(token, apiKeyPrefix) }
