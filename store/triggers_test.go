package store

import (
	"errors"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func TestLastFireIsUnknownUntilSet(t *testing.T) {
	db, _ := openTemp(t)
	if _, ok, err := db.LastFire("ws", "nightly"); err != nil || ok {
		t.Fatalf("LastFire of a new trigger = ok %v, err %v; want not found", ok, err)
	}
}

func TestLastFireSurvivesReopenPerWorkspaceAndTrigger(t *testing.T) {
	db, path := openTemp(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	fires := map[[2]string]time.Time{
		{"a", "nightly"}: time.Date(2025, 3, 30, 3, 0, 0, 123456789, berlin),
		{"b", "nightly"}: t0,
		{"a", "hourly"}:  t0.Add(time.Hour),
	}
	for k, at := range fires {
		if err := db.SetLastFire(k[0], k[1], at); err != nil {
			t.Fatalf("SetLastFire %v: %v", k, err)
		}
	}
	// A later fire replaces the earlier one.
	fires[[2]string{"a", "hourly"}] = t0.Add(2 * time.Hour)
	if err := db.SetLastFire("a", "hourly", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for k, want := range fires {
		got, ok, err := db.LastFire(k[0], k[1])
		if err != nil || !ok {
			t.Fatalf("LastFire %v: ok %v, err %v", k, ok, err)
		}
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("LastFire %v = %v, want %v in UTC", k, got, want)
		}
	}
	if _, ok, _ := db.LastFire("ab", "nightly"); ok {
		t.Error("workspace \"ab\" shares state with another key")
	}
}

func TestTriggerStateRefusesNamesThatCannotBeKeys(t *testing.T) {
	db, _ := openTemp(t)
	for _, k := range [][2]string{{"", "t"}, {"ws", ""}, {"w\x00s", "t"}, {"ws", "t\x00"}} {
		if err := db.SetLastFire(k[0], k[1], t0); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("SetLastFire(%q, %q) err = %v, want ErrInvalid", k[0], k[1], err)
		}
		if _, _, err := db.LastFire(k[0], k[1]); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("LastFire(%q, %q) err = %v, want ErrInvalid", k[0], k[1], err)
		}
	}
}
