package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/engine/workspace"
)

func TestWorkspaceTarballHoldsExactlyTheShippedFiles(t *testing.T) {
	f := newFixture(t)
	r := f.worker("GET", "/worker/workspace/main.tar.gz", nil).expect(200)
	rev := r.header.Get("X-Revision")
	if rev == "" || r.header.Get("ETag") != `"`+rev+`"` || r.header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("headers = %v", r.header)
	}
	ws := f.api("GET", "/api/workspaces", nil).expect(200).array()
	for _, w := range ws {
		if w["name"] == "main" && w["revision"] != rev {
			t.Fatalf("X-Revision %s is not the workspace revision %v", rev, w["revision"])
		}
	}

	want, err := workspace.ShippedFiles(f.wsDir)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		got = append(got, hdr.Name)
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(filepath.Join(f.wsDir, filepath.FromSlash(hdr.Name)))
		if err != nil || !bytes.Equal(content, disk) {
			t.Fatalf("%s differs from the file on disk (%v)", hdr.Name, err)
		}
		if hdr.Name == "scripts/run.sh" && hdr.Mode&0o111 == 0 {
			t.Fatalf("scripts/run.sh lost its executable bit: %o", hdr.Mode)
		}
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("tarball holds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tarball holds %v, want %v", got, want)
		}
	}
	for _, name := range got {
		if name == ".git/HEAD" {
			t.Fatal("the tarball ships VCS metadata")
		}
	}

	// Unchanged revision: quoted, bare or in a list, the ETag saves the download.
	for _, etag := range []string{`"` + rev + `"`, rev, `"other", W/"` + rev + `"`} {
		nm := f.do("GET", "/worker/workspace/main.tar.gz", nil, map[string]string{"Authorization": "Bearer " + workerToken, "If-None-Match": etag}).expect(304)
		if len(nm.body) != 0 || nm.header.Get("ETag") != `"`+rev+`"` {
			t.Fatalf("304 for %q: body %d bytes, etag %q", etag, len(nm.body), nm.header.Get("ETag"))
		}
	}
	f.do("GET", "/worker/workspace/main.tar.gz", nil, map[string]string{"Authorization": "Bearer " + workerToken, "If-None-Match": `"stale"`}).expect(200)

	again := f.worker("GET", "/worker/workspace/main.tar.gz?revision="+rev, nil).expect(200)
	if !bytes.Equal(again.body, r.body) {
		t.Fatal("the same revision gave different bytes")
	}
}

func TestWorkspaceTarballOfUnknownWorkspaceOrRevisionIs404(t *testing.T) {
	f := newFixture(t)
	f.worker("GET", "/worker/workspace/nope.tar.gz", nil).expectError(404, `workspace "nope"`)
	f.worker("GET", "/worker/workspace/broken.tar.gz", nil).expect(404)
	f.worker("GET", "/worker/workspace/main.zip", nil).expect(404)
	f.worker("GET", "/worker/workspace/main.tar.gz?revision=deadbeef", nil).expectError(404, "deadbeef")
}

func TestOlderRevisionTarballIsServedFromCacheAfterReload(t *testing.T) {
	f := newFixture(t)
	old := f.worker("GET", "/worker/workspace/main.tar.gz", nil).expect(200)
	oldRev := old.header.Get("X-Revision")

	writeFile(t, filepath.Join(f.wsDir, "README.md"), "changed\n", 0o644)
	var cur response
	eventually(t, "the workspace reloads", func() bool {
		cur = f.worker("GET", "/worker/workspace/main.tar.gz", nil).expect(200)
		return cur.header.Get("X-Revision") != oldRev
	})
	if bytes.Equal(cur.body, old.body) {
		t.Fatal("the new revision has the old bytes")
	}
	// Jobs still running on the old revision keep getting its files.
	again := f.worker("GET", "/worker/workspace/main.tar.gz?revision="+oldRev, nil).expect(200)
	if again.header.Get("X-Revision") != oldRev || !bytes.Equal(again.body, old.body) {
		t.Fatalf("revision %s was not served from the cache", oldRev)
	}
}

func TestWorkspaceTarballOverTheSizeLimitIsRefused(t *testing.T) {
	size := func(f *fixture) (n int64) {
		files, err := workspace.ShippedFiles(f.wsDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range files {
			st, err := os.Stat(filepath.Join(f.wsDir, rel))
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
		return n
	}
	exact := newFixture(t)
	total := size(exact)
	atLimit := newFixture(t, func(c *fixtureConfig) { c.MaxWorkspace = total })
	atLimit.worker("GET", "/worker/workspace/main.tar.gz", nil).expect(200)
	over := newFixture(t, func(c *fixtureConfig) { c.MaxWorkspace = total - 1 })
	over.worker("GET", "/worker/workspace/main.tar.gz", nil).expectError(409,
		fmt.Sprintf(`workspace "main": its files add up to more than limits.workspace_size (%dB)`, total-1))
}
