package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KeySize is the length of ACKD_TOKEN_KEY once decoded: AES-256.
const KeySize = 32

// sealVersion is the first byte of every sealed secret: AES-256-GCM, a
// 12-byte random nonce, then the ciphertext and its tag.
const sealVersion = 1

// Keys seal and open installation secrets: Current seals, and opening
// tries Current, then Old (ACKD_TOKEN_KEY_OLD, during a key rotation).
type Keys struct {
	cur, old cipher.AEAD
	// state signs install states: HMAC-SHA256 keyed by a key derived from
	// the current key (never the sealing key itself).
	state []byte
}

// ParseKey decodes a base64 key of KeySize bytes (standard or URL
// alphabet, padded or not). Its error never quotes the key.
func ParseKey(name, s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("%s: %d bytes once decoded, want %d (make one with: head -c 32 /dev/urandom | base64)", name, len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s: not base64 (make one with: head -c 32 /dev/urandom | base64)", name)
}

// NewKeys makes Keys from a current key and an optional old one (nil).
func NewKeys(cur, old []byte) (*Keys, error) {
	k := &Keys{}
	mac := hmac.New(sha256.New, cur)
	mac.Write([]byte("ackd oauth state v1"))
	k.state = mac.Sum(nil)
	var err error
	if k.cur, err = gcm(cur); err != nil {
		return nil, err
	}
	if old != nil {
		if k.old, err = gcm(old); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("token key: %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// seal encrypts plain bound to aad (the installation key: a sealed secret
// moved to another row does not open).
func (k *Keys) seal(aad string, plain []byte) []byte {
	nonce := make([]byte, k.cur.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand never fails on Linux
	out := append([]byte{sealVersion}, nonce...)
	return k.cur.Seal(out, nonce, plain, []byte(aad))
}

// ErrSealed: a secret opened with neither key (a wrong ACKD_TOKEN_KEY, or
// a row that was tampered with).
var ErrSealed = errors.New("installation secret does not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): wrong key, or the row was altered")

// open decrypts a sealed secret; old reports that it needed the old key.
func (k *Keys) open(aad string, sealed []byte) (plain []byte, old bool, err error) {
	n := k.cur.NonceSize()
	if len(sealed) < 1+n || sealed[0] != sealVersion {
		return nil, false, ErrSealed
	}
	nonce, ct := sealed[1:1+n], sealed[1+n:]
	if p, err := k.cur.Open(nil, nonce, ct, []byte(aad)); err == nil {
		return p, false, nil
	}
	if k.old != nil {
		if p, err := k.old.Open(nil, nonce, ct, []byte(aad)); err == nil {
			return p, true, nil
		}
	}
	return nil, false, ErrSealed
}

// Tokens is what an installation's sealed secret holds.
type Tokens struct {
	Bot     string    `json:"bot"`               // xoxb-… (or xoxe.xoxb-… with rotation)
	Refresh string    `json:"refresh,omitempty"` // single use; empty without token rotation
	Expires time.Time `json:"expires,omitzero"`  // zero without token rotation
	Issued  time.Time `json:"issued,omitzero"`   // when Bot was issued: its life is Expires-Issued
}

func aad(key string) string { return "ackd installation " + key }

// Seal encodes and seals t for installation key.
func (k *Keys) Seal(key string, t Tokens) []byte {
	b, _ := json.Marshal(t) // strings and times always marshal
	return k.seal(aad(key), b)
}

// Open opens installation key's sealed secret.
func (k *Keys) Open(key string, sealed []byte) (t Tokens, old bool, err error) {
	b, old, err := k.open(aad(key), sealed)
	if err != nil {
		return Tokens{}, false, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return Tokens{}, false, fmt.Errorf("installation secret: %w", err)
	}
	return t, old, nil
}

// Opens reports whether installation key's sealed secret opens with
// either key (it is not returned).
func (k *Keys) Opens(key string, sealed []byte) bool {
	_, _, err := k.open(aad(key), sealed)
	return err == nil
}

// newState returns a fresh install state that expires at exp: random,
// with its expiry, signed ("{random}.{expiry ms}.{mac}").
func (k *Keys) newState(exp time.Time) string {
	body := rand.Text() + "." + strconv.FormatInt(exp.UnixMilli(), 10)
	return body + "." + k.stateMAC(body)
}

func (k *Keys) stateMAC(body string) string {
	m := hmac.New(sha256.New, k.state)
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Why a state is refused.
var (
	errStateForged  = errors.New("state not issued by this ackd")
	errStateExpired = errors.New("state expired")
)

// checkState verifies a state's signature and that it has not expired at now.
func (k *Keys) checkState(state string, now time.Time) error {
	i := strings.LastIndexByte(state, '.')
	if i < 0 {
		return errStateForged
	}
	body, mac := state[:i], state[i+1:]
	if !hmac.Equal([]byte(mac), []byte(k.stateMAC(body))) {
		return errStateForged
	}
	_, expS, _ := strings.Cut(body, ".")
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil {
		return errStateForged
	}
	if !now.Before(time.UnixMilli(exp)) {
		return errStateExpired
	}
	return nil
}
