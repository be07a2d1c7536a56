package main

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

func TestSplitFlags(t *testing.T) {
	for _, tc := range []struct {
		o  splitOptions
		ok bool
	}{
		{splitOptions{rule: "off"}, true},
		{splitOptions{rule: "paper", window: 36, cost: time.Millisecond}, true},
		{splitOptions{rule: "gain"}, true},
		{splitOptions{rule: "sometimes"}, false},
		// -overload-window and -master-cost are bounded as they are
		// parsed (TestFlagBounds).
	} {
		err := tc.o.check()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.o, err)
		}
	}
	c := (&splitOptions{rule: "gain", window: 10, cost: time.Millisecond}).config()
	if c.Rule != grid.SplitGain || c.Window != 10 || c.MessageCost != time.Millisecond {
		t.Errorf("config %+v", c)
	}
}
