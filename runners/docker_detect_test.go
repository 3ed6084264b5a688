package runners

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

func TestDetectRunnersOffersDockerWhenTheDaemonAnswers(t *testing.T) {
	needDocker(t)
	found, tags, err := DetectRunners(context.Background(), DetectEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found["docker"].(*Docker); !ok {
		t.Errorf("runners = %v, want a docker runner", found)
	}
	if !slices.Equal(tags, []string{"docker"}) {
		t.Errorf("tags = %v, want [docker]", tags)
	}
}

func TestDetectRunnersWithoutDaemonOffersNothing(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")
	found, tags, err := DetectRunners(context.Background(), DetectEnv{Docker: DockerConfig{Endpoint: sock}})
	if err != nil {
		t.Fatal(err)
	}
	if found["docker"] != nil || len(tags) != 0 {
		t.Errorf("runners %v, tags %v; want none when no daemon answers", found, tags)
	}
}

func TestDetectRunnersRejectsImagesForUnknownLanguages(t *testing.T) {
	_, _, err := DetectRunners(context.Background(), DetectEnv{Docker: DockerConfig{Images: map[string]string{"cobol": "x"}}})
	if err == nil {
		t.Error("want an error for docker.images.cobol")
	}
}
