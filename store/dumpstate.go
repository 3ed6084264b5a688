package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/dump"
)

var _ dump.Store = (*DB)(nil)

// DumpState reads the small tables an export carries whole: auth links,
// trigger fires, event marks and counts.
func (db *DB) DumpState(ctx context.Context) (dump.State, error) {
	var s dump.State
	err := db.view(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketAuthLinks).ForEach(func(_, v []byte) error {
			var l accounts.AuthLink
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("decode auth link: %w", err)
			}
			s.AuthLinks = append(s.AuthLinks, l)
			return nil
		}); err != nil {
			return err
		}
		if b := tx.Bucket(bucketTriggers); b != nil {
			if err := b.ForEach(func(k, v []byte) error {
				ws, trigger, ok := bytes.Cut(k, []byte{sep})
				at, err := time.Parse(time.RFC3339Nano, string(v))
				if !ok || err != nil {
					return fmt.Errorf("decode trigger state %q: %v", k, err)
				}
				s.Fires = append(s.Fires, engine.TriggerFire{Workspace: string(ws), Trigger: string(trigger), At: at})
				return nil
			}); err != nil {
				return err
			}
		}
		if b := tx.Bucket(bucketEvents); b != nil {
			return b.ForEach(func(k, v []byte) error {
				switch {
				case bytes.HasPrefix(k, []byte("c")) && len(v) == 8:
					s.Consumed = append(s.Consumed, dump.Consumed{Source: string(k[1:]), Count: int64(binary.BigEndian.Uint64(v))})
				case bytes.HasPrefix(k, []byte("m")) && len(k) > 1+jobIDLen:
					var rec eventMarkRec
					if err := json.Unmarshal(v, &rec); err != nil {
						return fmt.Errorf("decode event mark %q: %w", k, err)
					}
					s.Marks = append(s.Marks, dump.Mark{JobID: string(k[1 : 1+jobIDLen]), Step: string(k[1+jobIDLen:]), Run: rec.Run, Seq: rec.Seq})
				default:
					return fmt.Errorf("event marks: unknown key %q", k)
				}
				return nil
			})
		}
		return nil
	})
	return s, err
}

// jobIDLen is a job id's length (a UUID's text): event mark keys join it
// to the step's name without a separator.
const jobIDLen = 36

// RestoreState writes what DumpState read, in one transaction.
func (db *DB) RestoreState(ctx context.Context, s dump.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fires, err := encodeFires(s.Fires)
	if err != nil {
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		links := tx.Bucket(bucketAuthLinks)
		for _, l := range s.AuthLinks {
			if _, err := getUser(tx, l.UserID); err != nil {
				return fmt.Errorf("auth link %s/%s: %w", l.Provider, l.Subject, err)
			}
			v, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if err := links.Put(joinKey(strPrefix(l.Provider), []byte(l.Subject)), v); err != nil {
				return err
			}
		}
		for _, f := range fires {
			if err := putFire(tx, f.key, f.val); err != nil {
				return err
			}
		}
		if len(s.Marks)+len(s.Consumed) == 0 {
			return nil
		}
		b, err := tx.CreateBucketIfNotExists(bucketEvents)
		if err != nil {
			return err
		}
		for _, m := range s.Marks {
			if len(m.JobID) != jobIDLen {
				return fmt.Errorf("event mark of job %q: not a job id: %w", m.JobID, engine.ErrInvalid)
			}
			v, err := json.Marshal(eventMarkRec{Run: m.Run, Seq: m.Seq})
			if err != nil {
				return err
			}
			if err := b.Put(eventMarkKey(m.JobID, m.Step), v); err != nil {
				return err
			}
		}
		for _, c := range s.Consumed {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(c.Count))
			if err := b.Put(eventCountKey(c.Source), n[:]); err != nil {
				return err
			}
		}
		return nil
	})
}

// List names every snapshot kept.
func (s *Snapshots) List() ([]dump.SnapshotRef, error) {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*", "*"+snapshotExt))
	if err != nil {
		return nil, err
	}
	var refs []dump.SnapshotRef
	for _, p := range paths {
		ws := filepath.Base(filepath.Dir(p))
		rev := strings.TrimSuffix(filepath.Base(p), snapshotExt)
		if strings.HasPrefix(ws, ".") || strings.HasPrefix(rev, ".") {
			continue
		}
		refs = append(refs, dump.SnapshotRef{Workspace: ws, Revision: rev})
	}
	return refs, nil
}

// Put stores a snapshot's tarball as it is (an import's): written to a
// temporary name and renamed, as Save does.
func (s *Snapshots) Put(workspace, revision string, tarGz io.Reader) error {
	target, err := s.path(workspace, revision)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, tarGz)
	if serr := tmp.Sync(); err == nil {
		err = serr
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("put revision snapshot %s/%s: %w", workspace, revision, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	return syncDir(filepath.Dir(target))
}
