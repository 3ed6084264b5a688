package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// floodConfig turns auth on with two hashing slots, and lifts the address
// limit so that every login of the flood, all from 127.0.0.1, reaches the
// hashing bound under test.
const floodConfig = `auth:
  jwt_secret: ` + testJWTSecret + `
  refresh_secret: ` + testRefreshSecret + `
  providers:
    local: {provider_type: internal}
  initial_user: {email: admin@example.com, password: first-password}
limits:
  logins_in_flight: 2
  login_rate_address: 100000/m
`

// floodRSSLimit is the peak the server must stay under: the flood's 300
// argon2id hashes of 19 MiB each would take 5.7 GB at once.
const floodRSSLimit = 600 << 20

// TestLoginFloodStaysWithinMemory sends 300 concurrent logins with wrong
// passwords to the real binary: each answer is 401, 429 or 503 (with
// Retry-After), the server's peak RSS stays under 600 MB because at most
// logins_in_flight hashes exist at once, and the right password still
// gets in afterwards.
func TestLoginFloodStaysWithinMemory(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	writeWorkspace(t, ws, "tasks:\n  hi:\n    flow:\n      s: {type: script, script: echo hi}\n")
	config := filepath.Join(dir, "server-config.yaml")
	if err := os.WriteFile(config, []byte(floodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	server := startProcess(t, bin, addr, "--config", config, "--data-dir", filepath.Join(dir, "data"), "--workspace", ws, "--workers", "0")
	url := "http://" + addr + "/api/auth/login"

	const logins = 300
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: logins}}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		problems []string
	)
	start := make(chan struct{})
	for i := range logins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Most name an account of their own; one in ten guesses the
			// admin's password, which trips its account limit.
			email := fmt.Sprintf("nobody%d@example.com", i)
			if i%10 == 0 {
				email = "admin@example.com"
			}
			<-start
			status, header, body, err := postJSON(client, url, map[string]string{"email": email, "password": "wrong"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				problems = append(problems, err.Error())
			case status != 401 && status != 429 && status != 503:
				problems = append(problems, fmt.Sprintf("status %d: %s", status, body))
			case !isJSONError(body):
				problems = append(problems, fmt.Sprintf("status %d without a JSON error: %s", status, body))
			case status != 401 && header.Get("Retry-After") == "":
				problems = append(problems, fmt.Sprintf("status %d without Retry-After", status))
			}
			statuses[status]++
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	peak := peakRSS(t, server.Process.Pid)
	t.Logf("%d concurrent bad logins in %v: answers %v; server peak RSS %.0f MB (limit %d MB)",
		logins, time.Since(began).Round(time.Millisecond), statuses, float64(peak)/(1<<20), floodRSSLimit>>20)
	if len(problems) > 0 {
		t.Fatalf("%d bad answers, e.g. %s", len(problems), problems[0])
	}
	if peak > floodRSSLimit {
		t.Fatalf("server peak RSS %d MB, over %d MB: password hashing is not bounded", peak>>20, floodRSSLimit>>20)
	}

	// The owner gets in afterwards, waiting as Retry-After says if the
	// flood spent the account's budget.
	deadline := time.Now().Add(time.Minute)
	for {
		status, header, body, err := postJSON(client, url, map[string]string{"email": "admin@example.com", "password": "first-password"})
		if err == nil && status == 200 {
			break
		}
		if err != nil || (status != 429 && status != 503) || time.Now().After(deadline) {
			t.Fatalf("good login after the flood: %d %s %v", status, body, err)
		}
		wait, _ := strconv.Atoi(header.Get("Retry-After"))
		time.Sleep(time.Duration(max(wait, 1)) * time.Second)
	}
}

func postJSON(client *http.Client, url string, body any) (int, http.Header, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}

func isJSONError(body []byte) bool {
	var e map[string]any
	if json.Unmarshal(body, &e) != nil || len(e) != 1 {
		return false
	}
	msg, ok := e["error"].(string)
	return ok && msg != ""
}
