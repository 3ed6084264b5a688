package dispatch

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Caller is who sends a report: the server's own in-process pool, which
// its transport vouches for, or a remote worker, with the secret it sent
// (workerproto.SecretHeader). The shared worker token admits any remote
// worker; the secret tells which one a report comes from.
type Caller struct {
	inProcess bool
	secret    string
}

// InProcess is the in-process pool's transport.
var InProcess = Caller{inProcess: true}

// Remote is a remote worker that sent secret ("" for none).
func Remote(secret string) Caller { return Caller{secret: secret} }

// newSecret draws a worker's secret and its hex SHA-256, which is all the
// server keeps. 256 random bits need no slow hash: guessing is hopeless,
// and a claim, checked against it every time, stays cheap.
func newSecret() (secret, sha string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(secret))
	return secret, hex.EncodeToString(sum[:])
}

// prove checks that who may report as workerID: the in-process pool may
// (it is the server); a remote caller only as a remote worker, with that
// worker's secret, or, under InterfaceProtocol, as a worker registered
// without one. An unknown worker is left to the engine, which refuses it
// as unknown so the worker registers again.
func (s *Service) prove(who Caller, workerID string) error {
	if who.inProcess {
		return nil
	}
	cred, known := s.eng.WorkerCredential(workerID)
	switch {
	case !known:
		return nil
	case cred.InProcess:
		return workerproto.Errorf(workerproto.ErrForbidden, "worker %s is one of the server's in-process workers: no remote worker may report as it", workerID)
	case cred.SecretSHA256 == "":
		if s.cfg.InterfaceProtocol {
			return nil
		}
		return workerproto.Errorf(workerproto.ErrForbidden,
			"worker %s registered without a secret, which this server accepts only under worker_protocol: interface: restart the worker so it registers again", workerID)
	case who.secret == "":
		return workerproto.Errorf(workerproto.ErrForbidden,
			"worker %s proves who it is with the secret it got at registration: send it in the %s header", workerID, workerproto.SecretHeader)
	}
	want, err := hex.DecodeString(cred.SecretSHA256)
	got := sha256.Sum256([]byte(who.secret))
	if err != nil || subtle.ConstantTimeCompare(got[:], want) != 1 {
		return workerproto.Errorf(workerproto.ErrForbidden, "the %s header does not hold worker %s's secret", workerproto.SecretHeader, workerID)
	}
	return nil
}

// reporter is the worker a step's report comes from, proved: the one it
// names or, under InterfaceProtocol, when it names none, the worker
// holding the step while it runs. "" (no name, and no leniency) is left
// to the report's validation.
func (s *Service) reporter(who Caller, jobID, step, named string) (string, error) {
	if named == "" && s.cfg.InterfaceProtocol {
		if named = s.eng.StepHolder(jobID, step); named == "" {
			return "", workerproto.Errorf(workerproto.ErrConflict, "step %q of job %s is not running: no worker holds it", step, jobID)
		}
	}
	if named == "" {
		return "", nil
	}
	return named, s.prove(who, named)
}
