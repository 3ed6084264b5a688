package docker

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/runners"
)

func TestDetectRunnersOffersDockerWhenTheDaemonAnswers(t *testing.T) {
	needDocker(t)
	found, tags, err := runners.NewRegistry(Kind(Config{})).Detect(context.Background(), runners.DetectEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found["docker"].(*Runner); !ok {
		t.Errorf("runners = %v, want a docker runner", found)
	}
	if !slices.Equal(tags, []string{"docker"}) {
		t.Errorf("tags = %v, want [docker]", tags)
	}
}

func TestDetectRunnersWithoutDaemonOffersNothing(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")
	found, tags, err := runners.NewRegistry(Kind(Config{Endpoint: sock})).Detect(context.Background(), runners.DetectEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if found["docker"] != nil || len(tags) != 0 {
		t.Errorf("runners %v, tags %v; want none when no daemon answers", found, tags)
	}
}

func TestDetectRunnersRejectsImagesForUnknownLanguages(t *testing.T) {
	_, _, err := runners.NewRegistry(Kind(Config{Images: map[string]string{"cobol": "x"}})).Detect(context.Background(), runners.DetectEnv{})
	if err == nil {
		t.Error("want an error for docker.images.cobol")
	}
}
