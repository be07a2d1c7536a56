package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/problems/plugin"
)

// One hello timeout, -plugin-start-timeout (or the file's
// plugin_start_timeout), for the start-up check and for every start;
// the command line wins over the file.
func TestPluginStartTimeoutSetting(t *testing.T) {
	t.Setenv("ESGRID_KEY", "")
	dir := t.TempDir()
	if o, err := parseOptions([]string{"-join", "m"}); err != nil || o.hello != plugin.DefaultStartTimeout {
		t.Errorf("default: %v, %v; want %v", o.hello, err, plugin.DefaultStartTimeout)
	}
	file := writeFile(t, dir, "slow.json", `{"join": "m", "plugin_start_timeout": "2m"}`, 0o600)
	if o, err := parseOptions([]string{"-config", file}); err != nil || o.hello != 2*time.Minute {
		t.Errorf("from the file: %+v, %v", o, err)
	}
	if o, err := parseOptions([]string{"-config", file, "-plugin-start-timeout", "45s"}); err != nil || o.hello != 45*time.Second {
		t.Errorf("from the command line: %+v, %v", o, err)
	}
	bad := writeFile(t, dir, "bad.json", `{"join": "m", "plugin_start_timeout": "soon"}`, 0o600)
	for _, args := range [][]string{{"-join", "m", "-plugin-start-timeout", "0s"}, {"-config", bad}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "-key", testSecret), nil, &out, &errb)
		if code != exitConfig || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "start_timeout") && !strings.Contains(errb.String(), "start-timeout") {
			t.Errorf("%v: exit %d, stderr %q; want exitConfig (78) and one line naming the setting", args, code, errb.String())
		}
	}
}

// The start-up check waits -plugin-start-timeout for a plugin's hello,
// and names it when the plugin says nothing.
func TestStartUpCheckTakesTheStartTimeout(t *testing.T) {
	mute := writeFile(t, t.TempDir(), "mute", "#!/bin/sh\nexec sleep 3600\n", 0o755)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-join", "127.0.0.1:1", "-key", testSecret, "-plugin", "mute=" + mute, "-plugin-start-timeout", "300ms"}, nil, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no hello within 300ms") {
		t.Errorf("exit %d, stderr %q; want 1 and the plugin's silence for 300ms", code, errb.String())
	}
}
