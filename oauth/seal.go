package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/seal"
)

// KeySize is the length of ACKD_TOKEN_KEY once decoded: AES-256.
const KeySize = seal.KeySize

// Keys seal and open installation secrets: the current key seals, and
// opening tries it, then the old one (ACKD_TOKEN_KEY_OLD, during a key
// rotation). The cipher is package seal's, shared with the sweep's
// execution tokens.
type Keys struct {
	sk *seal.Keys
	// state signs install states: HMAC-SHA256 keyed by a key derived from
	// the current key (never the sealing key itself).
	state []byte
}

// ParseKey decodes a base64 key of KeySize bytes (standard or URL
// alphabet, padded or not). Its error never quotes the key.
func ParseKey(name, s string) ([]byte, error) { return seal.ParseKey(name, s) }

// NewKeys makes Keys from a current key and an optional old one (nil).
func NewKeys(cur, old []byte) (*Keys, error) {
	k := &Keys{}
	mac := hmac.New(sha256.New, cur)
	mac.Write([]byte("ackd oauth state v1"))
	k.state = mac.Sum(nil)
	var err error
	if k.sk, err = seal.New(cur, old); err != nil {
		return nil, err
	}
	return k, nil
}

// Sealer is the cipher under these keys, for the other secrets ackd seals
// with ACKD_TOKEN_KEY (a workflow step's execution token).
func (k *Keys) Sealer() *seal.Keys { return k.sk }

// seal encrypts plain bound to aad (the installation key: a sealed secret
// moved to another row does not open).
func (k *Keys) seal(aad string, plain []byte) []byte { return k.sk.Seal(aad, plain) }

// ErrSealed: a secret opened with neither key (a wrong ACKD_TOKEN_KEY, or
// a row that was tampered with).
var ErrSealed = errors.New("installation secret does not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): wrong key, or the row was altered")

// open decrypts a sealed secret; old reports that it needed the old key.
func (k *Keys) open(aad string, sealed []byte) (plain []byte, old bool, err error) {
	p, old, err := k.sk.Open(aad, sealed)
	if err != nil {
		return nil, false, ErrSealed
	}
	return p, old, nil
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
