package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

func testInstallations(t *testing.T, newDB NewDB) {
	t.Run("put, get, list, replace and delete", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if _, err := s.GetInstallation(ctx, "T1"); !errors.Is(err, store.ErrNoInstallation) {
			t.Fatalf("missing installation: err %v, want ErrNoInstallation", err)
		}
		a := store.Installation{Key: "T1", TeamID: "T1", BotUserID: "U1", BotID: "B1", Scopes: "chat:write",
			InstallerUserID: "U9", Secret: []byte{1, 2, 3}}
		org := store.Installation{Key: "E1", EnterpriseID: "E1", EnterpriseInstall: true, Secret: []byte{4}}
		for _, in := range []store.Installation{a, org} {
			if err := s.PutInstallation(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetInstallation(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		if got.BotUserID != "U1" || got.BotID != "B1" || got.Scopes != "chat:write" || got.InstallerUserID != "U9" ||
			!bytes.Equal(got.Secret, a.Secret) || got.InstalledAt.IsZero() || got.Version < 1 {
			t.Fatalf("got %+v", got)
		}
		list, err := s.ListInstallations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Key != "E1" || !list[0].EnterpriseInstall || list[1].Key != "T1" {
			t.Fatalf("list: %+v", list)
		}
		// A reinstall replaces the row and its secret, with a new version.
		a.Secret, a.BotID = []byte{9}, "B2"
		if err := s.PutInstallation(ctx, a); err != nil {
			t.Fatal(err)
		}
		again, _ := s.GetInstallation(ctx, "T1")
		if again.BotID != "B2" || !bytes.Equal(again.Secret, []byte{9}) || again.Version == got.Version {
			t.Fatalf("reinstall: %+v (before version %d)", again, got.Version)
		}
		if ok, err := s.DeleteInstallation(ctx, "T1"); err != nil || !ok {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if ok, err := s.DeleteInstallation(ctx, "T1"); err != nil || ok {
			t.Fatalf("second delete: %v %v, want false", ok, err)
		}
		if _, err := s.GetInstallation(ctx, "T1"); !errors.Is(err, store.ErrNoInstallation) {
			t.Fatalf("after delete: %v", err)
		}
	})

	t.Run("a secret update is fenced by its version; racing writers win once", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if err := s.PutInstallation(ctx, store.Installation{Key: "T1", TeamID: "T1", Secret: []byte("v1")}); err != nil {
			t.Fatal(err)
		}
		in, _ := s.GetInstallation(ctx, "T1")
		if err := s.SetInstallationError(ctx, "T1", "invalid_refresh_token"); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.GetInstallation(ctx, "T1"); e.Error != "invalid_refresh_token" {
			t.Fatalf("error not recorded: %+v", e)
		}
		const n = 8
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, ok, err := s.UpdateInstallationSecret(ctx, "T1", in.Version, fmt.Appendf(nil, "w%d", i))
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d writers with one version won, want exactly 1", wins.Load())
		}
		after, _ := s.GetInstallation(ctx, "T1")
		if after.Version == in.Version || after.Error != "" || bytes.Equal(after.Secret, []byte("v1")) {
			t.Fatalf("after update: %+v", after)
		}
		if _, ok, err := s.UpdateInstallationSecret(ctx, "T1", in.Version, []byte("stale")); err != nil || ok {
			t.Fatalf("stale version: %v %v, want not written", ok, err)
		}
		if _, ok, err := s.UpdateInstallationSecret(ctx, "T9", 1, []byte("x")); err != nil || ok {
			t.Fatalf("missing installation: %v %v, want not written", ok, err)
		}
	})

	t.Run("ParkInstallRows parks that installation's pending rows only", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		row := func(id, install string) store.Intent {
			return store.Intent{EventID: id, EventType: "message", Rows: []store.NewRow{{Key: id + ":r", Effect: "post",
				Payload: fmt.Sprintf(`{"route":"r","facts":{"install":%q}}`, install)}}}
		}
		mustRecord(t, s, row("Ev1", "T1"))
		mustRecord(t, s, row("Ev2", "T1"))
		mustRecord(t, s, row("Ev3", "T2"))
		mustRecord(t, s, row("Ev4", "T1"))
		done := claimOne(t, s, "tok") // Ev1's row, completed: stays done
		if held, err := s.Complete(ctx, done.ID, "tok", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		leased := claimOne(t, s, "tok2") // Ev2's row, leased: parked too
		n, err := s.ParkInstallRows(ctx, "T1", "uninstalled: app_uninstalled")
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("parked %d rows, want 2 (Ev2 leased, Ev4)", n)
		}
		for _, r := range all(t, s) {
			want := map[string]string{"Ev1:r": store.StatusDone, "Ev2:r": store.StatusParked, "Ev3:r": store.StatusPending, "Ev4:r": store.StatusParked}[r.Key]
			if r.Status != want {
				t.Errorf("%s: status %s, want %s", r.Key, r.Status, want)
			}
			if r.Status == store.StatusParked && r.LastError != "uninstalled: app_uninstalled" {
				t.Errorf("%s: last_error %q", r.Key, r.LastError)
			}
		}
		if n, err := s.WaitingRows(ctx); err != nil || n != 0 {
			t.Fatalf("waiting rows %d %v, want 0", n, err)
		}
		if held, err := s.Complete(ctx, leased.ID, "tok2", "", nil); err != nil || held {
			t.Fatalf("completing a parked row: held %v err %v, want the fence to fail", held, err)
		}
	})

	t.Run("WaitingRows counts pending rows that found no installation", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a", "b"))
		rows := mustClaim(t, s, "tok", 10, time.Minute)
		if _, err := s.Fail(ctx, rows[0].ID, "tok", store.Failure{Kind: store.FailRateLimited, Msg: "not_installed: no installation for team T1 yet", RetryAfter: time.Second}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fail(ctx, rows[1].ID, "tok", store.Failure{Kind: store.FailRetryable, Msg: "http_503"}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.WaitingRows(ctx); err != nil || n != 1 {
			t.Fatalf("waiting rows %d %v, want 1", n, err)
		}
	})

	t.Run("an oauth state is used once, with its installation, however many race for it", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		if used, err := s.OAuthStateUsed(ctx, "a"); err != nil || used {
			t.Fatalf("a fresh state: used %v %v", used, err)
		}
		const n = 8
		var firsts atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				// Each racer exchanged its own code: a different bot token.
				in := store.Installation{Key: "T1", TeamID: "T1", Secret: fmt.Appendf(nil, "w%d", i)}
				first, err := s.PutInstallationWithState(ctx, in, "a", 10*time.Minute)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			})
		}
		wg.Wait()
		if firsts.Load() != 1 {
			t.Fatalf("%d of %d racing uses were first, want 1", firsts.Load(), n)
		}
		got, err := s.GetInstallation(ctx, "T1")
		if err != nil || got.Version != 1 {
			t.Fatalf("the installation after the race: %+v %v: want exactly one write (version 1)", got, err)
		}
		if used, err := s.OAuthStateUsed(ctx, "a"); err != nil || !used {
			t.Fatalf("after its installation: used %v %v", used, err)
		}
		if first, err := s.PutInstallationWithState(ctx, store.Installation{Key: "T2", Secret: []byte{1}}, "b", 10*time.Minute); err != nil || !first {
			t.Fatalf("another state: %v %v", first, err)
		}
		// Past its ttl the record is gone (the caller refuses the expired
		// state by its own time); a later use of it is "first" again.
		db.Advance(11 * time.Minute)
		if used, err := s.OAuthStateUsed(ctx, "a"); err != nil || used {
			t.Fatalf("an expired record still counts: %v %v", used, err)
		}
		if first, err := s.PutInstallationWithState(ctx, store.Installation{Key: "T3", Secret: []byte{1}}, "c", 10*time.Minute); err != nil || !first {
			t.Fatalf("after expiry: %v %v", first, err)
		}
		if first, err := s.PutInstallationWithState(ctx, store.Installation{Key: "T1", Secret: []byte{2}}, "a", 10*time.Minute); err != nil || !first {
			t.Fatalf("an expired record is not pruned: %v %v", first, err)
		}
	})

	t.Run("Slack's time of an install is kept", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		at := time.Unix(1_800_000_000, 0)
		if err := s.PutInstallation(ctx, store.Installation{Key: "T1", Secret: []byte{1}, SlackInstalledAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutInstallation(ctx, store.Installation{Key: "T2", Secret: []byte{1}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetInstallation(ctx, "T1"); !got.SlackInstalledAt.Equal(at) {
			t.Fatalf("SlackInstalledAt %v, want %v", got.SlackInstalledAt, at)
		}
		if got, _ := s.GetInstallation(ctx, "T2"); !got.SlackInstalledAt.IsZero() {
			t.Fatalf("unknown SlackInstalledAt reads %v, want zero", got.SlackInstalledAt)
		}
	})

	testInstallEnd(t, newDB)

	t.Run("a lease has one holder until it expires or is released", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		const n = 8
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ok, err := s.AcquireLease(ctx, "refresh:T1", fmt.Sprintf("h%d", i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d of %d racing holders got the lease, want 1", wins.Load(), n)
		}
		if ok, _ := s.AcquireLease(ctx, "refresh:T2", "x", time.Minute); !ok {
			t.Fatal("another name's lease is independent")
		}
		if ok, _ := s.AcquireLease(ctx, "refresh:T2", "x", time.Minute); !ok {
			t.Fatal("the holder renews its own lease")
		}
		if ok, _ := s.AcquireLease(ctx, "refresh:T2", "y", time.Minute); ok {
			t.Fatal("a live lease was taken by another holder")
		}
		if err := s.ReleaseLease(ctx, "refresh:T2", "y"); err != nil { // not y's: nothing
			t.Fatal(err)
		}
		if ok, _ := s.AcquireLease(ctx, "refresh:T2", "y", time.Minute); ok {
			t.Fatal("released by a non-holder")
		}
		if err := s.ReleaseLease(ctx, "refresh:T2", "x"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.AcquireLease(ctx, "refresh:T2", "y", time.Minute); !ok {
			t.Fatal("a released lease is free")
		}
		db.Advance(2 * time.Minute)
		if ok, _ := s.AcquireLease(ctx, "refresh:T1", "late", time.Minute); !ok {
			t.Fatal("an expired lease is free")
		}
	})
}

// uninstall is an app_uninstalled intent for T1 at Slack's time at, with
// one route's row, which carries its team as every row under [oauth] does:
// it is this event's effect, never parked with the team's waiting rows.
func uninstall(id string, at time.Time) (store.Intent, store.InstallEnd) {
	return store.Intent{EventID: id, EventType: "app_uninstalled", Rows: []store.NewRow{{Key: id + ":audit", Effect: "log",
			Payload: `{"route":"audit","facts":{"install":"T1"}}`}}},
		store.InstallEnd{Key: "T1", EventTime: at, Reason: "uninstalled: app_uninstalled"}
}

func testInstallEnd(t *testing.T, newDB NewDB) {
	pending := func(t *testing.T, s store.Store, id string) {
		t.Helper()
		mustRecord(t, s, store.Intent{EventID: id, EventType: "message", Rows: []store.NewRow{{Key: id + ":r", Effect: "post",
			Payload: `{"route":"r","facts":{"install":"T1"}}`}}})
	}
	put := func(t *testing.T, s store.Store, slackAt time.Time) store.Installation {
		t.Helper()
		if err := s.PutInstallation(ctx, store.Installation{Key: "T1", TeamID: "T1", BotUserID: "UBOT", Secret: []byte{1},
			SlackInstalledAt: slackAt}); err != nil {
			t.Fatal(err)
		}
		in, err := s.GetInstallation(ctx, "T1")
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	installs := func(t *testing.T, s store.Store) int {
		t.Helper()
		list, err := s.ListInstallations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}

	t.Run("install, uninstall, reinstall, the uninstall retried: the reinstall stays", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		slackNow := time.Unix(1_800_000_000, 0)
		put(t, s, slackNow)
		pending(t, s, "Ev1")
		in, end := uninstall("EvU", slackNow.Add(time.Minute))
		res, err := s.RecordInstallEnd(ctx, in, end)
		if err != nil {
			t.Fatal(err)
		}
		if !res.First || res.Outcome != store.EndRemoved || res.Parked != 1 || !res.SlackClock {
			t.Fatalf("uninstall: %+v, want first, removed, 1 row parked, compared on Slack's clock", res)
		}
		if installs(t, s) != 0 {
			t.Fatal("the uninstall left the installation")
		}
		if own, err := s.GetByKey(ctx, "EvU:audit"); err != nil || own.Status != store.StatusPending {
			t.Fatalf("the uninstall's own route row: %+v, %v; want it pending (performed, not parked with the team's rows)", own, err)
		}
		put(t, s, slackNow.Add(2*time.Minute)) // the reinstall
		pending(t, s, "Ev2")
		res, err = s.RecordInstallEnd(ctx, in, end) // Slack's retry
		if err != nil {
			t.Fatal(err)
		}
		if res.First || res.Outcome != store.EndDuplicate {
			t.Fatalf("the retry: %+v, want a duplicate", res)
		}
		if installs(t, s) != 1 {
			t.Fatal("the retried uninstall removed the reinstall")
		}
		if r, _ := s.GetByKey(ctx, "Ev2:r"); r.Status != store.StatusPending {
			t.Fatalf("the reinstall's row is %s", r.Status)
		}
		if r, err := s.GetByKey(ctx, "EvU:audit"); err != nil || r.Status != store.StatusPending {
			t.Fatalf("the uninstall's own route row: %+v %v", r, err)
		}
	})

	t.Run("a first delivery older than the installation changes nothing, but is recorded", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		slackNow := time.Unix(1_800_000_000, 0)
		put(t, s, slackNow)
		pending(t, s, "Ev1")
		in, end := uninstall("EvOld", slackNow.Add(-time.Hour))
		res, err := s.RecordInstallEnd(ctx, in, end)
		if err != nil {
			t.Fatal(err)
		}
		if !res.First || res.Outcome != store.EndNewer || !res.Made.Equal(slackNow) || !res.SlackClock || res.Parked != 0 {
			t.Fatalf("an old uninstall: %+v, want first, newer (made %v)", res, slackNow)
		}
		if installs(t, s) != 1 {
			t.Fatal("an uninstall older than the installation removed it")
		}
		if r, _ := s.GetByKey(ctx, "Ev1:r"); r.Status != store.StatusPending {
			t.Fatalf("its row is %s", r.Status)
		}
		if ok, err := s.HasReceipt(ctx, "EvOld"); err != nil || !ok {
			t.Fatalf("no receipt for the old uninstall: %v %v", ok, err)
		}
		// The same second as the install is not older: it ends it.
		in, end = uninstall("EvSame", slackNow)
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndRemoved {
			t.Fatalf("an uninstall in the install's second: %+v %v, want removed", res, err)
		}
	})

	t.Run("without Slack's time the store's installed_at decides", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		in0 := put(t, s, time.Time{})
		in, end := uninstall("EvOld", in0.InstalledAt.Add(-time.Second))
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndNewer || res.SlackClock {
			t.Fatalf("older than installed_at: %+v %v", res, err)
		}
		in, end = uninstall("EvNew", db.Now(t).Add(time.Second))
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndRemoved {
			t.Fatalf("newer than installed_at: %+v %v", res, err)
		}
	})

	t.Run("tokens_revoked ends only its own bot's installation; none: nothing", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		at := time.Unix(1_800_000_000, 0)
		in, end := uninstall("EvNone", at)
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndNone || !res.First {
			t.Fatalf("no installation: %+v %v", res, err)
		}
		put(t, s, at)
		in, end = uninstall("EvOther", at.Add(time.Minute))
		end.BotUsers = []string{"UOTHER"}
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndOtherBot {
			t.Fatalf("another bot revoked: %+v %v", res, err)
		}
		in, end = uninstall("EvMine", at.Add(time.Minute))
		end.BotUsers = []string{"UOTHER", "UBOT"}
		if res, err := s.RecordInstallEnd(ctx, in, end); err != nil || res.Outcome != store.EndRemoved {
			t.Fatalf("its bot revoked: %+v %v", res, err)
		}
	})

	t.Run("racing deliveries of one uninstall: one first, one removal", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		at := time.Unix(1_800_000_000, 0)
		put(t, s, at)
		pending(t, s, "Ev1")
		const n = 8
		var firsts, removed, parked atomic.Int32
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				in, end := uninstall("EvU", at.Add(time.Minute))
				res, err := s.RecordInstallEnd(ctx, in, end)
				if err != nil {
					t.Error(err)
					return
				}
				if res.First {
					firsts.Add(1)
				}
				if res.Outcome == store.EndRemoved {
					removed.Add(1)
				}
				parked.Add(int32(res.Parked))
			})
		}
		wg.Wait()
		if firsts.Load() != 1 || removed.Load() != 1 || parked.Load() != 1 {
			t.Fatalf("%d first, %d removals, %d parked of %d racing deliveries; want 1, 1, 1", firsts.Load(), removed.Load(), parked.Load(), n)
		}
	})
}
