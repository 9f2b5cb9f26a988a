package seal

import (
	"bytes"
	"errors"
	"testing"
)

func keys(t *testing.T, cur, old byte) *Keys {
	t.Helper()
	var o []byte
	if old != 0 {
		o = bytes.Repeat([]byte{old}, KeySize)
	}
	k, err := New(bytes.Repeat([]byte{cur}, KeySize), o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k := keys(t, 1, 0)
	sealed := k.Seal("a", []byte("xwfp-secret"))
	if bytes.Contains(sealed, []byte("xwfp")) {
		t.Fatal("sealed bytes hold the plain text")
	}
	if p, old, err := k.Open("a", sealed); err != nil || old || string(p) != "xwfp-secret" {
		t.Fatalf("%q %v %v", p, old, err)
	}
	if _, _, err := k.Open("b", sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened bound to other data: %v", err)
	}
	if _, _, err := keys(t, 2, 0).Open("a", sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened with a wrong key: %v", err)
	}
	if p, old, err := keys(t, 2, 1).Open("a", sealed); err != nil || !old || string(p) != "xwfp-secret" {
		t.Fatalf("old key: %q %v %v", p, old, err)
	}
	if _, err := New(make([]byte, 5), nil); err == nil {
		t.Fatal("a short key was accepted")
	}
	if _, err := ParseKey("K", "not base64!"); err == nil {
		t.Fatal("bad base64 accepted")
	}
}
