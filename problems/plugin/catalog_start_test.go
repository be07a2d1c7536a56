package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/problems"
)

// Start opens a listed plugin for the dimension asked, and refuses one
// not listed; its errors name the entry.
func TestCatalogStart(t *testing.T) {
	cat, err := NewCatalog(Entry{Name: "testp", Path: helperPlugin(t, "serve")}, Entry{Name: "dead", Path: helperPlugin(t, "die")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Start(context.Background(), "testp", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Eval(context.Background(), []float64{1, 2, 3}); err != nil || p.Name() != "testp" {
		t.Errorf("%s: %v", p.Name(), err)
	}
	if _, err := cat.Start(context.Background(), "other", 3, 1); err == nil || !strings.Contains(err.Error(), `"other" is not listed`) {
		t.Errorf("%v, want not listed", err)
	}
	if _, err := cat.Start(context.Background(), "dead", 3, 1); err == nil || !strings.HasPrefix(err.Error(), "dead=") {
		t.Errorf("%v, want an error naming dead=PATH", err)
	}
}

// nonFiniteProblem is a problem that says what its hello says.
type nonFiniteProblem struct {
	problems.Problem
	h Hello
}

func (p nonFiniteProblem) Hello() Hello { return p.h }

// A plugin whose hello says "nonfinite" makes the master take NaN and
// ±Inf as answers, as -nonfinite does; a built-in problem or a plugin
// that does not say so does not.
func TestDeclaresNonFinite(t *testing.T) {
	sphere, err := problems.New("sphere", 2)
	if err != nil {
		t.Fatal(err)
	}
	if DeclaresNonFinite(sphere) {
		t.Error("a built-in problem counted as declaring non-finite answers")
	}
	if DeclaresNonFinite(nonFiniteProblem{Problem: sphere}) {
		t.Error("a plugin whose hello does not say nonfinite counted as saying it")
	}
	if !DeclaresNonFinite(nonFiniteProblem{Problem: sphere, h: Hello{NonFinite: true}}) {
		t.Error("a plugin whose hello says nonfinite did not count")
	}
}
