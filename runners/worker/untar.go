package worker

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// extractTarGz unpacks a gzip tarball into dest, an existing empty
// directory. Only directories, regular files and symlinks that stay inside
// dest are created; an entry escaping dest (absolute, "..", or a symlink
// pointing out) fails the whole extraction, as the archive is not to be
// trusted, and so does exceeding a limit (an error wrapping
// ErrWorkspaceLimit). On failure the caller removes dest.
func extractTarGz(r io.Reader, dest string, lim WorkspaceLimits) error {
	m := &meter{lim: lim.orDefaults()}
	if err := unpack(compressedReader{r, m}, dest, m); err != nil {
		if m.err != nil {
			// The limit, not how the reader or writer it stopped said so.
			return m.err
		}
		return err
	}
	return nil
}

func unpack(r io.Reader, dest string, m *meter) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("workspace archive: %w", err)
	}
	defer gz.Close()
	// Writes go through os.Root, so even a path through a symlink cannot
	// land outside dest.
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("workspace archive: %w", err)
	}
	defer root.Close()

	var links []string
	tr := tar.NewReader(unpackedReader{gz, m})
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("workspace archive: %w", err)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if err := m.entry(name, h.Typeflag, h.Size); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("workspace archive: %w", err)
			}
		case tar.TypeReg:
			if err := writeEntry(root, name, h, tr, m); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := checkLinkTarget(name, h.Linkname); err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return fmt.Errorf("workspace archive: %w", err)
			}
			links = append(links, name)
		default:
			// Hard links, devices and fifos have no place in a workspace.
		}
	}
	return checkLinksResolveInside(dest, links)
}

// entryName cleans an archive entry name and refuses one leaving the root.
func entryName(name string) (string, error) {
	if name == "" {
		return "", errors.New("workspace archive: entry with an empty name")
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", fmt.Errorf("workspace archive: entry %q is an absolute path", name)
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("workspace archive: entry %q escapes the workspace directory", name)
	}
	return filepath.FromSlash(clean), nil
}

// checkLinkTarget refuses a symlink whose target, read from where the link
// sits, leaves the root.
func checkLinkTarget(name, target string) error {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return fmt.Errorf("workspace archive: symlink %q points outside the workspace (%q)", name, target)
	}
	joined := path.Join(path.Dir(filepath.ToSlash(name)), target)
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return fmt.Errorf("workspace archive: symlink %q points outside the workspace (%q)", name, target)
	}
	return nil
}

// checkLinksResolveInside resolves each symlink for real: a chain of links
// that each look harmless (a -> ., b -> a/x/../..) can still climb out.
func checkLinksResolveInside(dest string, links []string) error {
	if len(links) == 0 {
		return nil
	}
	realRoot, err := filepath.EvalSymlinks(dest)
	if err != nil {
		return fmt.Errorf("workspace archive: %w", err)
	}
	for _, l := range links {
		resolved, err := filepath.EvalSymlinks(filepath.Join(dest, l))
		if err != nil {
			continue // dangling: it points nowhere, outside included
		}
		rel, err := filepath.Rel(realRoot, resolved)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("workspace archive: symlink %q points outside the workspace", filepath.ToSlash(l))
		}
	}
	return nil
}

func mkParent(root *os.Root, name string) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("workspace archive: %w", err)
		}
	}
	return nil
}

func writeEntry(root *os.Root, name string, h *tar.Header, r io.Reader, m *meter) error {
	if err := mkParent(root, name); err != nil {
		return err
	}
	// Keep the executable bits scripts rely on; always owner-readable.
	mode := os.FileMode(h.Mode).Perm() | 0o600
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("workspace archive: %w", err)
	}
	if _, err := io.Copy(&fileWriter{w: f, m: m}, io.LimitReader(r, h.Size)); err != nil {
		f.Close()
		return fmt.Errorf("workspace archive: write %q: %w", filepath.ToSlash(name), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("workspace archive: write %q: %w", filepath.ToSlash(name), err)
	}
	return nil
}
