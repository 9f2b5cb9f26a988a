package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// Instances: a heartbeat makes an instance visible while fresh, a stale one
// is not listed, Retire removes it, and a day-old row is deleted by the
// next heartbeat of anyone.
func TestInstances(t *testing.T) {
	c := newClock()
	s, path := newStore(t, c)
	ctx := context.Background()
	ids := func(fresh time.Duration) []string {
		t.Helper()
		ins, err := s.Instances(ctx, fresh)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range ins {
			out = append(out, in.ID)
		}
		return out
	}
	a := store.Instance{ID: "a", PID: 10, Host: "vm1", Listen: "127.0.0.1:3000", StartedAt: c.Now()}
	if err := s.Heartbeat(ctx, a); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	b := store.Instance{ID: "b", PID: 11, Host: "vm1", Listen: "127.0.0.1:3001", StartedAt: c.Now()}
	if err := s.Heartbeat(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := ids(30 * time.Second); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("fresh instances %v, want [a b]", got)
	}
	ins, _ := s.Instances(ctx, 30*time.Second)
	if ins[0].PID != 10 || ins[0].Host != "vm1" || ins[0].Listen != "127.0.0.1:3000" || !ins[0].HeartbeatAt.Equal(ins[0].StartedAt) {
		t.Errorf("instance a read back as %+v", ins[0])
	}

	c.Advance(40 * time.Second)
	if err := s.Heartbeat(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := ids(30 * time.Second); len(got) != 1 || got[0] != "b" {
		t.Fatalf("after a's heartbeat went stale: %v, want [b]", got)
	}
	if err := s.Retire(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := ids(30 * time.Second); len(got) != 0 {
		t.Fatalf("after b retired: %v", got)
	}
	c.Advance(25 * time.Hour)
	if err := s.Heartbeat(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := count(t, rawDB(t, path), `SELECT count(*) FROM ackd_instances WHERE instance_id = 'a'`); n != 0 {
		t.Errorf("a day-old instance row was kept")
	}
}

// A read-only store on a schema from before ackd_instances.effects (the
// inspection commands accept one) lists the instances with Performs nil.
func TestInstancesReadOnlyWithoutEffectsColumn(t *testing.T) {
	c := newClock()
	s, path := newStore(t, c)
	ctx := context.Background()
	if err := s.Heartbeat(ctx, store.Instance{ID: "a", PID: 1, Host: "h", Listen: "x", StartedAt: c.Now(), Performs: []string{"log"}}); err != nil {
		t.Fatal(err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(fmt.Sprintf(`ALTER TABLE ackd_instances DROP COLUMN effects; PRAGMA user_version = %d`, v-1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	r := mustOpen(t, path, store.Options{Now: c.Now, ReadOnly: true, MinSchema: 3})
	ins, err := r.Instances(ctx, time.Hour)
	if err != nil || len(ins) != 1 || ins[0].ID != "a" || ins[0].Performs != nil {
		t.Fatalf("Instances on the older schema = %+v, %v", ins, err)
	}
}

// A read-only store on a schema from before
// ackd_installations.slack_installed_at (ackd installs list, config check
// on a database an older daemon serves) reads installations with that time
// unknown.
func TestInstallationsReadOnlyWithoutSlackTime(t *testing.T) {
	c := newClock()
	s, path := newStore(t, c)
	ctx := context.Background()
	if err := s.PutInstallation(ctx, store.Installation{Key: "T1", Secret: []byte{1}, SlackInstalledAt: c.Now()}); err != nil {
		t.Fatal(err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(fmt.Sprintf(`ALTER TABLE ackd_installations DROP COLUMN slack_installed_at; PRAGMA user_version = %d`, v-1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	r := mustOpen(t, path, store.Options{Now: c.Now, ReadOnly: true, MinSchema: 3})
	list, err := r.ListInstallations(ctx)
	if err != nil || len(list) != 1 || list[0].Key != "T1" || !list[0].SlackInstalledAt.IsZero() {
		t.Fatalf("ListInstallations on the older schema = %+v, %v", list, err)
	}
	if _, err := r.GetInstallation(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
}
