package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/runners"
	docker "github.com/fsouza/go-dockerclient"
)

// pullInactivity aborts a pull that has stopped making progress.
const pullInactivity = time.Minute

// ensureImage makes sure image is on the daemon, pulling it when it is not.
func (d *Runner) ensureImage(ctx context.Context, image string, log func(stream, line string)) error {
	_, err := d.client.InspectImage(image)
	if err == nil {
		return nil
	}
	if !errors.Is(err, docker.ErrNoSuchImage) {
		return fmt.Errorf("inspect image %q: %w", image, err)
	}
	repo, tag := image, "" // a digest reference is pulled as it is
	if !strings.Contains(image, "@") {
		if repo, tag = docker.ParseRepositoryTag(image); tag == "" {
			tag = "latest"
		}
	}
	log(runners.Stdout, fmt.Sprintf("appliance: pulling image %s", image))
	err = d.client.PullImage(docker.PullImageOptions{
		Repository:        repo,
		Tag:               tag,
		OutputStream:      io.Discard,
		InactivityTimeout: pullInactivity,
		Context:           ctx,
	}, docker.AuthConfiguration{})
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("image %q is not available on this worker and could not be pulled: %w", image, err)
	}
	return nil
}

// copyFiles copies files (container path -> content) into the created
// container, as one tar extracted at its root.
func (d *Runner) copyFiles(ctx context.Context, id string, files map[string][]byte) error {
	archive, err := tarFiles(files)
	if err != nil {
		return err
	}
	upCtx, cancel := context.WithTimeout(ctx, dockerOpTimeout)
	defer cancel()
	err = d.client.UploadToContainer(id, docker.UploadToContainerOptions{
		InputStream: bytes.NewReader(archive),
		Path:        "/",
		Context:     upCtx,
	})
	if err != nil {
		return fmt.Errorf("copy step files into container: %w", err)
	}
	return nil
}

// tarFiles archives files under their absolute paths (made relative to /),
// with the directories they need. Everything is world-readable: the image
// may run as any user, and only this container sees the files.
func tarFiles(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	dirs := map[string]bool{}
	for name := range files {
		names = append(names, name)
		for dir := path.Dir(name); dir != "/" && dir != "."; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for dir := range dirs {
		dirList = append(dirList, dir)
	}
	sort.Strings(dirList) // parents sort before their children
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, dir := range dirList {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive step files: %w", err)
		}
	}
	for _, name := range names {
		content := files[name]
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Mode: 0o644, Size: int64(len(content)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive step files: %w", err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("archive step files: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("archive step files: %w", err)
	}
	return buf.Bytes(), nil
}
