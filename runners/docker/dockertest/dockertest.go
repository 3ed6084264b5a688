// Package dockertest gives tests a local Docker daemon and a busybox image
// built on it, since no registry can be reached to pull one.
// A test helper: it must not import engine, store, app or the server's api
// packages.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// Image is the test image: a static busybox on scratch, its applets linked
// into /bin (so sh, echo, sleep, cat exist) and /tmp and /data created.
const Image = "appliance-test-busybox:latest"

// BusyboxPath is where Debian's busybox-static package puts a static busybox.
const BusyboxPath = "/bin/busybox"

var (
	buildOnce sync.Once
	buildErr  error
)

// Require returns a client of the local daemon with Image built, or skips
// the test with the reason; under APPLIANCE_REQUIRE_DOCKER=1 a missing
// daemon or busybox fails the test instead.
func Require(t testing.TB) *docker.Client {
	t.Helper()
	unavailable := t.Skipf
	if os.Getenv("APPLIANCE_REQUIRE_DOCKER") == "1" {
		unavailable = t.Fatalf
	}
	client, err := docker.NewClientFromEnv()
	if err != nil {
		unavailable("no Docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := client.PingWithContext(ctx); err != nil {
		unavailable("no Docker daemon answers at %s: %v", client.Endpoint(), err)
	}
	if _, err := os.Stat(BusyboxPath); err != nil {
		unavailable("the test image needs a static busybox at %s (apt-get install busybox-static): %v", BusyboxPath, err)
	}
	buildOnce.Do(func() { buildErr = build(client) })
	if buildErr != nil {
		t.Fatalf("build test image %s: %v", Image, buildErr)
	}
	return client
}

// build builds Image from a tar context holding a Dockerfile and busybox.
func build(client *docker.Client) error {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return err
	}
	dockerfile := strings.Join([]string{
		"FROM scratch",
		"COPY busybox /bin/busybox",
		`RUN ["/bin/busybox", "--install", "-s", "/bin"]`,
		`RUN ["/bin/busybox", "mkdir", "-p", "/tmp", "/data"]`,
		"ENV PATH=/bin",
	}, "\n") + "\n"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"busybox", 0o755, bb}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = client.BuildImage(docker.BuildImageOptions{
		Name:           Image,
		InputStream:    &buf,
		OutputStream:   &out,
		RmTmpContainer: true,
		Context:        ctx,
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

// Containers lists the containers, running or not, carrying label=value.
func Containers(t testing.TB, client *docker.Client, label, value string) []docker.APIContainers {
	t.Helper()
	list, err := client.ListContainers(docker.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {label + "=" + value}},
	})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}
