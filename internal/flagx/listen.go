package flagx

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ListenError says in one line why the address addr given with flag
// cannot be listened on: the system's reason (address in use, not an
// address of this machine) rather than the whole chain of wrapping.
func ListenError(flag, addr string, err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return fmt.Errorf("%s %s: cannot listen: %v", flag, addr, se)
	}
	// Gossip's errors arrive as text only.
	if i := strings.LastIndex(err.Error(), "bind: "); i >= 0 {
		return fmt.Errorf("%s %s: cannot listen: %s", flag, addr, err.Error()[i:])
	}
	return fmt.Errorf("%s %s: cannot listen: %w", flag, addr, err)
}
