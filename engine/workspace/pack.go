package workspace

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ErrTooBig is Pack's refusal of a workspace whose shipped files add up
// to more than its limit.
var ErrTooBig = errors.New("workspace files over the size limit")

// packEpoch stamps every entry, so a revision packs to the same bytes
// whenever and wherever it is packed.
var packEpoch = time.Unix(0, 0).UTC()

// Pack writes the files dir ships to workers (ShippedFiles) into w as a
// gzip tarball, refusing with ErrTooBig once they add up to more than max
// bytes, and returns the revision they hash to, hashed as a loaded
// workspace's revision is but from the very bytes packed: a tarball and
// the revision it is named by cannot disagree. Only a file's executable
// bit is kept of its mode.
func Pack(w io.Writer, dir string, max int64) (revision string, err error) {
	files, err := ShippedFiles(dir)
	if err != nil {
		return "", err
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	h := sha256.New()
	left := max
	for _, rel := range files {
		if err := packFile(tw, h, dir, rel, &left); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// packFile packs one file, taking its size from *left first, and hashes
// it with the framing of revision: path, size, content.
func packFile(tw *tar.Writer, h io.Writer, dir, rel string, left *int64) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", rel)
	}
	if *left -= st.Size(); *left < 0 {
		return ErrTooBig
	}
	mode := int64(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Name: rel, Mode: mode, Size: st.Size(), ModTime: packEpoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	fmt.Fprintf(h, "%s\x00%d\x00", rel, st.Size())
	// A file that grew since Stat is cut to the size in the header; one
	// that shrank fails, rather than ship a tarball that lies.
	if _, err := io.CopyN(io.MultiWriter(tw, h), f, st.Size()); err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	return nil
}
