// Package seal encrypts the secrets ackd keeps at rest with ACKD_TOKEN_KEY:
// AES-256-GCM with a random nonce, each value bound to what it belongs to
// (its associated data: an installation, a stored request), so that a
// sealed value copied to another row does not open there. During a key
// rotation the previous key (ACKD_TOKEN_KEY_OLD) still opens what it
// sealed. Both users of the key share it: oauth (installation tokens) and
// sweep (a workflow step's execution token).
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of ACKD_TOKEN_KEY once decoded: AES-256.
const KeySize = 32

// version is the first byte of every sealed value: AES-256-GCM, a 12-byte
// random nonce, then the ciphertext and its tag.
const version = 1

// ErrSealed: a value opened with neither key (a wrong key, or an altered
// value, or one sealed for something else).
var ErrSealed = errors.New("sealed value does not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): wrong key, or the value was altered")

// Keys seal with the current key and open with the current key, then the
// old one.
type Keys struct {
	cur, old cipher.AEAD
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

// New makes Keys from a current key and an optional old one (nil).
func New(cur, old []byte) (*Keys, error) {
	k := &Keys{}
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

// Seal encrypts plain bound to aad.
func (k *Keys) Seal(aad string, plain []byte) []byte {
	nonce := make([]byte, k.cur.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand never fails on Linux
	out := append([]byte{version}, nonce...)
	return k.cur.Seal(out, nonce, plain, []byte(aad))
}

// Open decrypts a sealed value bound to aad; old reports that it needed
// the old key.
func (k *Keys) Open(aad string, sealed []byte) (plain []byte, old bool, err error) {
	n := k.cur.NonceSize()
	if len(sealed) < 1+n || sealed[0] != version {
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
