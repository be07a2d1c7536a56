package grid

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyEnv is the environment variable that holds the cluster key when
// neither -key nor -key-file is given.
const KeyEnv = "ESGRID_KEY"

// ErrNoKey means no cluster key was configured.
var ErrNoKey = errors.New("grid: no cluster key (use -key, -key-file or " + KeyEnv + ")")

// Key is the cluster key, from which two independent keys are derived: one
// encrypts gossip (memberlist's SecretKey), the other authenticates data
// connections (the handshake's HMAC). Knowing one derived key tells nothing
// about the other.
type Key struct {
	gossip [32]byte
	mac    [32]byte
}

// Labels keep the derived keys apart (HKDF-SHA256 "info").
const (
	gossipLabel = "esgrid gossip key v1"
	macLabel    = "esgrid data-connection mac key v1"
)

// NewKey derives the cluster's keys from secret, a passphrase shared by the
// master and every worker. An empty secret is ErrNoKey.
func NewKey(secret string) (*Key, error) {
	if secret == "" {
		return nil, ErrNoKey
	}
	k := new(Key)
	for _, d := range []struct {
		dst   *[32]byte
		label string
	}{{&k.gossip, gossipLabel}, {&k.mac, macLabel}} {
		b, err := hkdf.Key(sha256.New, []byte(secret), nil, d.label, 32)
		if err != nil {
			return nil, fmt.Errorf("grid: derive key: %w", err)
		}
		copy(d.dst[:], b)
	}
	return k, nil
}

// LoadKey finds the cluster key the way the commands' flags describe it:
// flagKey (-key) if not empty, else the contents of flagFile (-key-file,
// surrounding white space trimmed) if not empty, else the ESGRID_KEY
// environment variable. With none of them it returns ErrNoKey.
func LoadKey(flagKey, flagFile string) (*Key, error) {
	switch {
	case flagKey != "":
		return NewKey(flagKey)
	case flagFile != "":
		b, err := os.ReadFile(flagFile)
		if err != nil {
			return nil, fmt.Errorf("grid: key file: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return nil, fmt.Errorf("grid: key file %s is empty: %w", flagFile, ErrNoKey)
		}
		return NewKey(s)
	default:
		return NewKey(os.Getenv(KeyEnv))
	}
}

// GossipKey is the 32-byte key for memberlist's SecretKey (AES-256-GCM).
// The caller gets its own copy.
func (k *Key) GossipKey() []byte {
	b := k.gossip
	return b[:]
}
