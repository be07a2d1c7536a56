package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leaverReport is the report of a real run (see package report's tests).
const leaverReport = "../../report/testdata/leaver.json"

// esreport prints the summary, then writes each picture asked for and
// says where (what a picture holds, and its mode whatever the umask,
// package report's TestPicturesOfARealRun checks).
func TestSummaryAndPictures(t *testing.T) {
	dir := t.TempDir()
	pngPath, svgPath := filepath.Join(dir, "run.png"), filepath.Join(dir, "run.svg")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{leaverReport, "-png", pngPath, "-svg", svgPath, "-width", "1000", "-height", "1800"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "schedule ") {
		t.Errorf("no summary:\n%s", stdout.String())
	}
	for _, p := range []string{pngPath, svgPath} {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), "picture: "+p+"\n") {
			t.Errorf("esreport does not say it wrote %s:\n%s", p, stdout.String())
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	for _, tt := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"a.json", "b.json"}, 2},
		{[]string{filepath.Join(dir, "missing.json")}, 1},
		{[]string{bad}, 1},
		{[]string{leaverReport, "-width", "5"}, 2},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.code || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line", tt.args, code, stderr.String(), tt.code)
		}
	}
}
