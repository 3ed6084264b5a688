package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters of new hashes: OWASP's recommended minimum (19 MiB,
// 2 passes, 1 lane). Each hash records its own parameters, so raising them
// later leaves existing passwords valid.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// HashPassword hashes a password with argon2id into a PHC string:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash> (unpadded base64).
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("hash password: empty password")
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// Bounds on the parameters a stored hash may ask for, so a corrupted or
// hostile record cannot make one login allocate gigabytes.
const (
	maxArgonMemoryKiB = 1 << 20
	maxArgonTime      = 20
)

// verifyPassword reports whether password matches the PHC string; the
// comparison takes the same time wherever the two keys differ.
func verifyPassword(phc, password string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errors.New("verify password: not an argon2id PHC string")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, fmt.Errorf("verify password: unsupported argon2 version %q", parts[2])
	}
	var memory, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false, fmt.Errorf("verify password: bad parameters %q: %w", parts[3], err)
	}
	if memory == 0 || memory > maxArgonMemoryKiB || passes == 0 || passes > maxArgonTime || threads == 0 {
		return false, fmt.Errorf("verify password: parameters out of range %q", parts[3])
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("verify password: bad salt: %w", err)
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errors.New("verify password: bad hash")
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
