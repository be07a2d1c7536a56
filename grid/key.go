package grid

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// KeyEnv is the environment variable that holds the cluster key when
// neither -key nor -key-file is given.
const KeyEnv = "ESGRID_KEY"

// ErrNoKey means no cluster key was configured.
var ErrNoKey = errors.New("grid: no cluster key (use -key, -key-file or " + KeyEnv + ")")

// ErrWeakKey means the cluster key is too short, or too plainly not
// random, to carry 128 bits.
var ErrWeakKey = errors.New("grid: cluster key too weak")

// MinKeyLen is the shortest cluster key accepted, in bytes: 16 random
// bytes (128 bits) take 24 characters in base64. esgrid cannot measure
// how random a string is, so this is a floor, not a promise: GenerateKey
// (esrun -genkey) makes 32 random bytes, 44 characters.
const MinKeyLen = 24

// minKeySymbols is the fewest distinct characters a key may use:
// "aaaa…" or "abcabcabc…" are not keys, however long. (16 random bytes in
// hex, 32 characters of 16 symbols, use fewer than 8 of them with a
// probability below 10⁻⁹.)
const minKeySymbols = 8

// Key is the cluster key, from which three independent keys are derived:
// one encrypts gossip (memberlist's SecretKey), one authenticates the
// data connections' handshake (HMAC), and one is the root of every data
// connection's own sealing keys (HKDF with both handshake nonces, see
// sessionKeys). Knowing one derived key tells nothing about the others.
type Key struct {
	gossip [32]byte
	mac    [32]byte
	seal   [32]byte
}

// Labels keep the derived keys apart (HKDF-SHA256 "info").
const (
	gossipLabel = "esgrid gossip key v1"
	macLabel    = "esgrid data-connection mac key v1"
	sealLabel   = "esgrid data-connection seal key v1"
)

// CheckKey says whether secret is acceptable as a cluster key: at least
// MinKeyLen bytes, of at least a few different characters. The error
// wraps ErrNoKey (empty) or ErrWeakKey and says how to make a good key.
func CheckKey(secret string) error {
	if secret == "" {
		return ErrNoKey
	}
	if len(secret) < MinKeyLen {
		return fmt.Errorf("%w: %d %s long, at least %d are needed (128 bits: 16 random bytes in base64); make one with esrun -genkey FILE",
			ErrWeakKey, len(secret), plural(len(secret), "byte", "bytes"), MinKeyLen)
	}
	seen := make(map[rune]bool)
	for _, r := range secret {
		seen[r] = true
	}
	if len(seen) < minKeySymbols {
		return fmt.Errorf("%w: it uses only %d different %s, so it is not random; make one with esrun -genkey FILE",
			ErrWeakKey, len(seen), plural(len(seen), "character", "characters"))
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// NewKey derives the cluster's keys from secret, shared by the master and
// every worker. An empty secret is ErrNoKey; one that cannot carry 128
// bits (see CheckKey) is ErrWeakKey.
func NewKey(secret string) (*Key, error) {
	if err := CheckKey(secret); err != nil {
		return nil, err
	}
	k := new(Key)
	for _, d := range []struct {
		dst   *[32]byte
		label string
	}{{&k.gossip, gossipLabel}, {&k.mac, macLabel}, {&k.seal, sealLabel}} {
		b, err := hkdf.Key(sha256.New, []byte(secret), nil, d.label, 32)
		if err != nil {
			return nil, fmt.Errorf("grid: derive key: %w", err)
		}
		copy(d.dst[:], b)
	}
	return k, nil
}

// GenerateKey returns a fresh cluster key: 32 bytes from crypto/rand, in
// base64 (44 characters).
func GenerateKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("grid: generate key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b[:]), nil
}

// WriteKeyFile writes a fresh key (GenerateKey) to path, readable and
// writable by its owner only (mode 0600). It never replaces a file: an
// existing one may be the key a running grid uses.
func WriteKeyFile(path string) error {
	secret, err := GenerateKey()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("grid: key file %s exists; not replaced (remove it first to make a new key)", path)
		}
		return fmt.Errorf("grid: key file: %w", err)
	}
	// The umask may have taken bits away, never added: still, be sure.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(secret + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("grid: key file %s: %w", path, err)
	}
	return nil
}

// InsecureKeyFileFlag is the commands' flag that accepts a key file
// group or others may read or write (LoadKey's anyMode).
const InsecureKeyFileFlag = "key-file-insecure"

// ErrKeyFileMode means a key file that group or others may read or
// write, refused as ssh refuses such a private key.
var ErrKeyFileMode = errors.New("grid: key file open to others")

// LoadKey finds the cluster key the way the commands' flags describe it:
// flagKey (-key) if not empty, else the contents of flagFile (-key-file,
// surrounding white space trimmed) if not empty, else the ESGRID_KEY
// environment variable, trimmed alike (so that a key file and
// ESGRID_KEY set from its bytes, final newline and all, are one key).
// With none of them it returns ErrNoKey; a key too weak to use is
// ErrWeakKey, naming where it came from. A key file that
// is a regular file with any permission for group or others is
// ErrKeyFileMode, unless anyMode (-key-file-insecure) accepts it.
func LoadKey(flagKey, flagFile string, anyMode bool) (*Key, error) {
	switch {
	case flagKey != "":
		return keyFrom(flagKey, "-key")
	case flagFile != "":
		b, err := readKeyFile(flagFile, anyMode)
		if err != nil {
			return nil, err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return nil, fmt.Errorf("grid: key file %s is empty: %w", flagFile, ErrNoKey)
		}
		return keyFrom(s, "key file "+flagFile)
	default:
		s := strings.TrimSpace(os.Getenv(KeyEnv))
		if s == "" {
			return nil, ErrNoKey
		}
		return keyFrom(s, KeyEnv)
	}
}

func keyFrom(secret, where string) (*Key, error) {
	k, err := NewKey(secret)
	if err != nil && errors.Is(err, ErrWeakKey) {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return k, err
}

// MaxKeyFileSize bounds a key file: a key is a passphrase or a few dozen
// bytes of base64, and a larger file (or /dev/zero) is not a key file.
const MaxKeyFileSize = 4 << 10

// readKeyFile reads at most MaxKeyFileSize bytes of path, and fails if
// there are more, or if path is a regular file that group or others may
// read or write and anyMode is false. (A pipe or a device, such as
// -key-file <(pass show esgrid), has no such mode to check; Windows has
// no such bits.)
func readKeyFile(path string, anyMode bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("grid: key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("grid: key file: %w", err)
	}
	if perm := fi.Mode().Perm(); !anyMode && fi.Mode().IsRegular() && perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%w: %s has mode %04o, so group or others may read or change the key; chmod 600 %s (or accept it with -%s)",
			ErrKeyFileMode, path, perm, path, InsecureKeyFileFlag)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("grid: key file: %w", err)
	}
	if len(b) > MaxKeyFileSize {
		return nil, fmt.Errorf("grid: key file %s is larger than %d bytes: not a key file", path, MaxKeyFileSize)
	}
	return b, nil
}

// GossipKey is the 32-byte key for memberlist's SecretKey (AES-256-GCM).
// The caller gets its own copy.
func (k *Key) GossipKey() []byte {
	b := k.gossip
	return b[:]
}

// Seal labels: one key per direction of a connection, so that a frame
// can never be reflected back to its sender.
const (
	sealMasterLabel = "esgrid seal master to worker v1"
	sealWorkerLabel = "esgrid seal worker to master v1"
)

// sessionKeys derives one connection's two sealing keys (AES-256-GCM)
// from the cluster's seal key and both handshake nonces (HKDF-SHA256,
// the nonces as salt): fresh for every connection, since both sides'
// nonces are.
func (k *Key) sessionKeys(masterNonce, workerNonce []byte) (toWorker, toMaster []byte, err error) {
	salt := make([]byte, 0, len(masterNonce)+len(workerNonce))
	salt = append(append(salt, masterNonce...), workerNonce...)
	prk, err := hkdf.Extract(sha256.New, k.seal[:], salt)
	if err != nil {
		return nil, nil, fmt.Errorf("grid: derive connection keys: %w", err)
	}
	if toWorker, err = hkdf.Expand(sha256.New, prk, sealMasterLabel, 32); err != nil {
		return nil, nil, fmt.Errorf("grid: derive connection keys: %w", err)
	}
	if toMaster, err = hkdf.Expand(sha256.New, prk, sealWorkerLabel, 32); err != nil {
		return nil, nil, fmt.Errorf("grid: derive connection keys: %w", err)
	}
	return toWorker, toMaster, nil
}
