package grid

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A key file is read up to MaxKeyFileSize bytes and no further: a larger
// file, or an endless one such as /dev/zero, is refused with a message
// naming the file and the cap.
func TestLoadKeyFileSize(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	atCap := write("at-cap", bytes.Repeat([]byte("0123456789abcdef"), MaxKeyFileSize/16))
	if k, err := LoadKey("", atCap, false); err != nil || k == nil {
		t.Errorf("key file of %d bytes: %v", MaxKeyFileSize, err)
	}
	over := write("over", bytes.Repeat([]byte("k"), MaxKeyFileSize+1))
	for _, path := range []string{over, "/dev/zero"} {
		if _, err := os.Stat(path); err != nil {
			continue // no /dev/zero here
		}
		k, err := LoadKey("", path, false)
		if err == nil || k != nil {
			t.Fatalf("LoadKey(%s) = %v, %v; want an error", path, k, err)
		}
		if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "larger than 4096 bytes") {
			t.Errorf("LoadKey(%s): %q", path, msg)
		}
	}
}

// A key must carry 128 bits: shorter keys, and long ones of a handful of
// characters, are refused with a message that says how to make one.
func TestWeakKeysRefused(t *testing.T) {
	good, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		secret string
		ok     bool
		want   string
	}{
		{"a", false, "1 byte long, at least 24"},
		{"s3cret", false, "6 bytes long, at least 24"},
		{"correct horse battery", false, "21 bytes long"},
		{strings.Repeat("a", 64), false, "only 1 different character,"},
		{strings.Repeat("0123", 10), false, "only 4 different characters"},
		{"EjRWeJq83vASNFZ4mrze8A==", true, ""}, // 16 bytes in base64
		{"00112233445566778899aabbccddeeff", true, ""},
		{good, true, ""},
	} {
		k, err := NewKey(c.secret)
		if c.ok {
			if err != nil || k == nil {
				t.Errorf("NewKey(%q): %v", c.secret, err)
			}
			continue
		}
		if !errors.Is(err, ErrWeakKey) || k != nil {
			t.Errorf("NewKey(%q) = %v, %v; want ErrWeakKey", c.secret, k, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, "esrun -genkey") {
			t.Errorf("NewKey(%q): %q; want it to say %q and how to make a key", c.secret, msg, c.want)
		}
	}
	if _, err := NewKey(""); !errors.Is(err, ErrNoKey) {
		t.Errorf("empty key: %v", err)
	}
	// LoadKey says where the weak key came from.
	t.Setenv(KeyEnv, "short")
	if _, err := LoadKey("", "", false); err == nil || !strings.Contains(err.Error(), KeyEnv) {
		t.Errorf("weak key in %s: %v", KeyEnv, err)
	}
	if _, err := LoadKey("a", "", false); err == nil || !strings.Contains(err.Error(), "-key") {
		t.Errorf("weak -key: %v", err)
	}
}

// WriteKeyFile writes a fresh, acceptable key readable by its owner only,
// and never replaces a file.
func TestWriteKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "K")
	if err := WriteKeyFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("key file mode %v, want 0600", mode)
	}
	first, err := LoadKey("", path, false)
	if err != nil {
		t.Fatalf("the key written cannot be loaded: %v", err)
	}
	b, _ := os.ReadFile(path)
	if n := len(strings.TrimSpace(string(b))); n != 44 {
		t.Errorf("key of %d characters, want 44 (32 bytes in base64)", n)
	}
	err = WriteKeyFile(path)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second WriteKeyFile: %v, want a refusal to replace", err)
	}
	again, err := LoadKey("", path, false)
	if err != nil || again.mac != first.mac {
		t.Errorf("the key file changed: %v", err)
	}
	other := filepath.Join(t.TempDir(), "K2")
	if err := WriteKeyFile(other); err != nil {
		t.Fatal(err)
	}
	if k, _ := LoadKey("", other, false); k == nil || k.mac == first.mac {
		t.Error("two generated keys are equal")
	}
}

// A key file that group or others may read or write is refused, as ssh
// refuses such a private key, with one line that says how to fix it;
// anyMode (-key-file-insecure) accepts it.
func TestKeyFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no permission bits on Windows")
	}
	secret, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o400, 0o640, 0o644, 0o666, 0o620, 0o604, 0o660} {
		path := filepath.Join(dir, fmt.Sprintf("key-%04o", mode))
		if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		k, err := LoadKey("", path, false)
		if mode&0o077 == 0 {
			if err != nil || k == nil {
				t.Errorf("mode %04o: %v", mode, err)
			}
		} else {
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if k != nil || !errors.Is(err, ErrKeyFileMode) || !strings.Contains(msg, "chmod 600 "+path) ||
				!strings.Contains(msg, fmt.Sprintf("mode %04o", mode)) || strings.Contains(msg, "\n") || strings.Contains(msg, secret) {
				t.Errorf("mode %04o: %v, %q; want ErrKeyFileMode in one line saying chmod 600 %s", mode, k, msg, path)
			}
		}
		if k, err := LoadKey("", path, true); err != nil || k == nil {
			t.Errorf("mode %04o with -%s: %v", mode, InsecureKeyFileFlag, err)
		}
	}
}

// ESGRID_KEY is trimmed as a key file is: the file's bytes, final newline
// and all, in the variable give the file's key; white space alone is no
// key.
func TestKeyEnvTrimmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "K")
	if err := WriteKeyFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := LoadKey("", path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{string(b) + "\n", " \t" + strings.TrimSpace(string(b)) + "\r\n"} {
		t.Setenv(KeyEnv, v)
		k, err := LoadKey("", "", false)
		if err != nil || k.mac != fromFile.mac {
			t.Errorf("%s=%q: %v; want the key file's key", KeyEnv, v, err)
		}
	}
	t.Setenv(KeyEnv, " \n")
	if _, err := LoadKey("", "", false); !errors.Is(err, ErrNoKey) {
		t.Errorf("%s of white space: %v, want ErrNoKey", KeyEnv, err)
	}
}
