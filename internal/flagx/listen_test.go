package flagx

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// An address in use is one line naming the flag, the address and the
// system's reason; gossip's textual errors keep their bind: part only.
func TestListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = net.Listen("tcp", l.Addr().String())
	if err == nil {
		t.Skip("the system let two listeners share an address")
	}
	got := ListenError("-listen", l.Addr().String(), err).Error()
	if want := "-listen " + l.Addr().String() + ": cannot listen: bind: "; !strings.HasPrefix(got, want) {
		t.Errorf("%q, want %q and the system's reason", got, want)
	}
	text := errors.New("memberlist: failed to start TCP listener on \"127.0.0.1\" port 7946: listen tcp 127.0.0.1:7946: bind: address already in use")
	if got := ListenError("-gossip", "127.0.0.1:7946", text).Error(); got != "-gossip 127.0.0.1:7946: cannot listen: bind: address already in use" {
		t.Errorf("%q", got)
	}
	other := errors.New("no such host")
	if err := ListenError("-metrics", "x:1", other); !errors.Is(err, other) || err.Error() != "-metrics x:1: cannot listen: no such host" {
		t.Errorf("%v", err)
	}
}
