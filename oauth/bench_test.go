package oauth

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// BenchmarkBotToken is what a token per team adds to each Web API effect:
// the installation read at perform time and its secret opened (SQLite).
func BenchmarkBotToken(b *testing.B) {
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "ackd.db"), store.Options{Schema: string(schema)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	keys, err := NewKeys(bytes.Repeat([]byte{3}, KeySize), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.PutInstallation(context.Background(), store.Installation{Key: "T1", TeamID: "T1",
		Secret: keys.Seal("T1", Tokens{Bot: "xoxb-bench"})}); err != nil {
		b.Fatal(err)
	}
	s := New(Config{}, st, keys, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if tok, err := s.BotToken(context.Background(), "T1"); err != nil || tok != "xoxb-bench" {
			b.Fatal(tok, err)
		}
	}
}
