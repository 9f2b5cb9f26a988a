package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testOpenModes: a store opened ReadOnly reads everything and writes
// nothing; one opened NoMigrate never changes the schema and refuses a
// version outside [MinSchema, latest] with a *SchemaError.
func testOpenModes(t *testing.T, newDB NewDB) {
	t.Run("read-only reads every inspection call and refuses every write", func(t *testing.T) {
		db := newDB(t)
		w := db.Open(t, store.Options{})
		mustRecord(t, w, intent("Ev1", "a", "b"))
		row := claimOne(t, w, "A")
		if _, err := w.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "x"}); err != nil {
			t.Fatal(err)
		}
		in := store.Instance{ID: "I1", PID: 1, Host: "h", Listen: "127.0.0.1:1", StartedAt: db.Now(t)}
		if err := w.Heartbeat(ctx, in); err != nil {
			t.Fatal(err)
		}
		before, err := w.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}

		r := db.Open(t, store.Options{ReadOnly: true})
		st, err := r.Stats(ctx)
		if err != nil || st.Queue.Pending != before.Queue.Pending || st.Parked != 1 || st.Receipts != 1 {
			t.Fatalf("read-only Stats = %+v, %v; want %+v", st, err, before)
		}
		if rows, err := r.List(ctx, "", 10); err != nil || len(rows) != 2 {
			t.Fatalf("read-only List = %d rows, %v", len(rows), err)
		}
		if got, err := r.Get(ctx, row.ID); err != nil || got.Status != store.StatusParked {
			t.Fatalf("read-only Get = %+v, %v", got, err)
		}
		if ins, err := r.Instances(ctx, time.Hour); err != nil || len(ins) != 1 || ins[0].ID != "I1" {
			t.Fatalf("read-only Instances = %+v, %v", ins, err)
		}
		if rows, n, err := r.Matching(ctx, store.ParkedFilter{}, 10); err != nil || n != 1 || len(rows) != 1 {
			t.Fatalf("read-only Matching = %d rows of %d, %v", len(rows), n, err)
		}
		if routes, effects, err := r.FilterNames(ctx, store.StatusParked); err != nil || len(routes) != 1 || len(effects) != 1 {
			t.Fatalf("read-only FilterNames = %v %v, %v", routes, effects, err)
		}
		if v, err := r.SchemaVersion(ctx); err != nil || v != before.SchemaVersion {
			t.Fatalf("read-only SchemaVersion = %d, %v; want %d", v, err, before.SchemaVersion)
		}

		writes := map[string]error{}
		_, writes["RecordIntent"] = r.RecordIntent(ctx, intent("Ev2", "a"))
		_, writes["Claim"] = r.Claim(ctx, "B", 10, time.Hour, nil)
		writes["Requeue"] = r.Requeue(ctx, row.ID)
		_, writes["RequeueParked"] = r.RequeueParked(ctx, store.ParkedFilter{})
		writes["Discard"] = r.Discard(ctx, row.ID)
		_, writes["DiscardParked"] = r.DiscardParked(ctx, store.ParkedFilter{Route: "a"})
		writes["Heartbeat"] = r.Heartbeat(ctx, store.Instance{ID: "I2", PID: 2, Host: "h", Listen: "x", StartedAt: db.Now(t)})
		writes["Retire"] = r.Retire(ctx, "I1")
		writes["CheckWrite"] = r.CheckWrite(ctx)
		for name, err := range writes {
			if !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("read-only %s = %v, want ErrReadOnly", name, err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		after, err := w.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Queue.Pending != before.Queue.Pending || after.Parked != before.Parked || after.Receipts != before.Receipts {
			t.Fatalf("after the read-only store: %+v, before %+v", after, before)
		}
		if ins, _ := w.Instances(ctx, time.Hour); len(ins) != 1 {
			t.Fatalf("instances after the read-only store: %+v", ins)
		}
	})

	t.Run("without migrating, an older schema is refused naming both versions and left as it is", func(t *testing.T) {
		db := newDB(t)
		w := db.Open(t, store.Options{})
		latest, err := w.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		db.SetSchemaVersion(t, latest-1)
		for _, opts := range []store.Options{{NoMigrate: true}, {ReadOnly: true, MinSchema: latest}} {
			_, err := db.TryOpen(t, opts)
			var se *store.SchemaError
			if !errors.As(err, &se) || se.Found != latest-1 || se.Known != latest {
				t.Fatalf("open %+v of version %d: %v, want a SchemaError found %d known %d", opts, latest-1, err, latest-1, latest)
			}
		}
		if v := db.Open(t, store.Options{ReadOnly: true, MinSchema: latest - 1}); v == nil {
			t.Fatal("no store")
		} else if got, err := v.SchemaVersion(ctx); err != nil || got != latest-1 {
			t.Fatalf("read-only open accepting %d: version %d, %v", latest-1, got, err)
		}
		// Still the older version: nothing migrated it.
		v := db.Open(t, store.Options{ReadOnly: true, MinSchema: 1})
		if got, _ := v.SchemaVersion(ctx); got != latest-1 {
			t.Fatalf("schema version %d after opens that must not migrate, want %d", got, latest-1)
		}
	})

	t.Run("without migrating, a newer schema is refused naming both versions", func(t *testing.T) {
		db := newDB(t)
		w := db.Open(t, store.Options{})
		latest, err := w.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		db.SetSchemaVersion(t, latest+1)
		for _, opts := range []store.Options{{NoMigrate: true}, {ReadOnly: true, MinSchema: 1}} {
			_, err := db.TryOpen(t, opts)
			var se *store.SchemaError
			if !errors.As(err, &se) || se.Found != latest+1 || se.Known != latest {
				t.Fatalf("open %+v of version %d: %v, want a SchemaError found %d known %d", opts, latest+1, err, latest+1, latest)
			}
		}
	})
}
