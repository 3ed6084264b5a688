package auth

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
)

var phcShape = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashPasswordWritesASaltedPHCString(t *testing.T) {
	a, err := HashPassword("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := HashPassword("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	if !phcShape.MatchString(a) {
		t.Fatalf("hash %q is not an argon2id PHC string with our parameters", a)
	}
	if a == b {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	if _, err := HashPassword(""); err == nil {
		t.Fatal("an empty password was hashed")
	}
}

func TestVerifyPassword(t *testing.T) {
	good, err := HashPassword("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, "$")
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	tests := []struct {
		name     string
		phc      string
		password string
		want     bool
		wantErr  bool
	}{
		{"right password", good, "hunter2", true, false},
		{"wrong password", good, "hunter3", false, false},
		{"empty password", good, "", false, false},
		// A hash with other parameters still verifies: they are read from it.
		{"lighter parameters", lightHash(t, "pw"), "pw", true, false},
		{"other algorithm", with(1, "argon2i"), "hunter2", false, true},
		{"other version", with(2, "v=16"), "hunter2", false, true},
		{"memory out of range", with(3, "m=99999999,t=2,p=1"), "hunter2", false, true},
		{"zero passes", with(3, "m=19456,t=0,p=1"), "hunter2", false, true},
		{"garbled parameters", with(3, "m=x"), "hunter2", false, true},
		{"bad salt", with(4, "!!!"), "hunter2", false, true},
		{"empty hash", with(5, ""), "hunter2", false, true},
		{"not a PHC string", "plaintext", "plaintext", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verifyPassword(tt.phc, tt.password)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("verifyPassword = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// lightHash is a valid PHC string made with other parameters than ours.
func lightHash(t *testing.T, password string) string {
	t.Helper()
	// m=1024,t=1,p=1 of "pw" with salt "saltsaltsaltsalt".
	const phc = "$argon2id$v=19$m=1024,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$"
	key := argonKey(password, "saltsaltsaltsalt", 1, 1024, 1)
	return phc + key
}

func argonKey(password, salt string, passes, memory uint32, threads uint8) string {
	return base64.RawStdEncoding.EncodeToString(argon2.IDKey([]byte(password), []byte(salt), passes, memory, threads, 32))
}
