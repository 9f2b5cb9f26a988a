package oauth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustKeys(t *testing.T, cur, old byte) *Keys {
	t.Helper()
	var o []byte
	if old != 0 {
		o = bytes.Repeat([]byte{old}, KeySize)
	}
	k, err := NewKeys(bytes.Repeat([]byte{cur}, KeySize), o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSeal(t *testing.T) {
	t.Parallel()
	tok := Tokens{Bot: "xoxe.xoxb-secret", Refresh: "xoxe-1-refresh", Expires: time.UnixMilli(1700000000000).UTC(), Issued: time.UnixMilli(1699990000000).UTC()}
	k := mustKeys(t, 1, 0)
	sealed := k.Seal("T1", tok)
	if bytes.Contains(sealed, []byte("xoxe")) || bytes.Contains(sealed, []byte("refresh")) {
		t.Fatal("sealed bytes hold the token")
	}
	if again := k.Seal("T1", tok); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	t.Run("opens with its key", func(t *testing.T) {
		got, old, err := k.Open("T1", sealed)
		if err != nil || old || got != tok {
			t.Fatalf("%+v %v %v", got, old, err)
		}
	})
	t.Run("bound to its installation", func(t *testing.T) {
		if _, _, err := k.Open("T2", sealed); !errors.Is(err, ErrSealed) {
			t.Fatalf("opened under another key: %v", err)
		}
	})
	t.Run("a wrong key or an altered byte does not open", func(t *testing.T) {
		if _, _, err := mustKeys(t, 2, 0).Open("T1", sealed); !errors.Is(err, ErrSealed) {
			t.Fatalf("wrong key: %v", err)
		}
		bad := bytes.Clone(sealed)
		bad[len(bad)-1] ^= 1
		if _, _, err := k.Open("T1", bad); !errors.Is(err, ErrSealed) {
			t.Fatalf("altered: %v", err)
		}
	})
	t.Run("the old key reads during a rotation", func(t *testing.T) {
		got, old, err := mustKeys(t, 2, 1).Open("T1", sealed)
		if err != nil || !old || got != tok {
			t.Fatalf("%+v %v %v", got, old, err)
		}
	})
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{0xfb}, KeySize)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := ParseKey("K", enc.EncodeToString(raw)+"\n"); err != nil || !bytes.Equal(b, raw) {
			t.Errorf("%v %v", b, err)
		}
	}
	for _, bad := range []string{"not base64 !!", base64.StdEncoding.EncodeToString(raw[:16])} {
		_, err := ParseKey("ACKD_TOKEN_KEY", bad)
		if err == nil || !strings.Contains(err.Error(), "ACKD_TOKEN_KEY") || strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	issued := time.Unix(1000, 0)
	tok := Tokens{Bot: "b", Refresh: "r", Issued: issued, Expires: issued.Add(12 * time.Hour)}
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, false}, {2 * time.Hour, false}, {6*time.Hour - time.Second, false}, {6 * time.Hour, true}, {13 * time.Hour, true}} {
		if got := due(tok, issued.Add(tc.after)); got != tc.want {
			t.Errorf("%s after issue: due %v, want %v", tc.after, got, tc.want)
		}
	}
	if due(Tokens{Bot: "b"}, issued) {
		t.Error("a token without rotation is never due")
	}
	if at := dueAt(tok); !at.Equal(issued.Add(6 * time.Hour)) {
		t.Errorf("dueAt %s", at)
	}
}

func TestState(t *testing.T) {
	t.Parallel()
	k := mustKeys(t, 1, 0)
	now := time.Unix(5000, 0)
	st := k.newState(now.Add(StateTTL))
	if st == k.newState(now.Add(StateTTL)) {
		t.Fatal("two states are equal")
	}
	if err := k.checkState(st, now); err != nil {
		t.Fatalf("fresh state: %v", err)
	}
	if err := k.checkState(st, now.Add(StateTTL)); !errors.Is(err, errStateExpired) {
		t.Fatalf("at its expiry: %v", err)
	}
	if err := mustKeys(t, 2, 0).checkState(st, now); !errors.Is(err, errStateForged) {
		t.Fatalf("another key's state: %v", err)
	}
	body := st[:strings.LastIndexByte(st, '.')]
	later := strings.Replace(body, ".", ".9", 1) // a longer expiry, same mac
	for _, bad := range []string{"", "nodots", later + st[len(body):], st + "0", "x." + st} {
		if err := k.checkState(bad, now); !errors.Is(err, errStateForged) {
			t.Errorf("%q: %v, want forged", bad, err)
		}
	}
}
