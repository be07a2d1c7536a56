package grid

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// Role says what a node does in a run.
type Role uint8

// The roles a node can gossip.
const (
	RoleWorker Role = iota + 1 // runs tasks; dials the master's data address
	RoleMaster                 // drives the policy; listens for workers
)

// String returns "worker" or "master".
func (r Role) String() string {
	switch r {
	case RoleWorker:
		return "worker"
	case RoleMaster:
		return "master"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Limits on the metadata a node gossips. They are checked when metadata is
// built and again when a peer's metadata is read, so neither side trusts
// the other to have stayed small.
const (
	// MaxMetaProblems bounds NodeMeta.Problems.
	MaxMetaProblems = 32
	// MaxMetaSlots bounds NodeMeta.Slots.
	MaxMetaSlots = 1 << 16
	// metaFields is the number of positional fields in encoded metadata.
	metaFields = 6
)

// Errors returned when metadata cannot be built or read.
var (
	// ErrMetaTooLarge: encoded metadata exceeds memberlist.MetaMaxSize
	// (memberlist panics on larger metadata, so it is refused first).
	ErrMetaTooLarge = errors.New("grid: node metadata too large")
	// ErrMetaVersion: the peer speaks another protocol version.
	ErrMetaVersion = errors.New("grid: node metadata from another protocol version")
	// ErrBadMeta: the metadata is malformed.
	ErrBadMeta = errors.New("grid: malformed node metadata")
)

// MetaVersion is the version of NodeMeta's format. It is not the data
// connections' ProtocolVersion: a worker of another protocol version
// still finds the master through gossip, and is then told in the
// handshake which versions the two speak.
const MetaVersion = 1

// NodeMeta is what a node tells the cluster about itself through gossip.
// It travels as a compact positional msgpack array
// [version, role, data address, slots, problems, leaving] of at most
// memberlist.MetaMaxSize (512) bytes.
type NodeMeta struct {
	// Version is the metadata's format version; MarshalBinary fills in
	// MetaVersion when it is 0.
	Version int
	// Role is master or worker.
	Role Role
	// DataAddr is the host:port a master accepts data connections on
	// (empty for workers). A host left unspecified ("", 0.0.0.0, ::) is
	// replaced by the node's gossip address in Member.DataAddr.
	DataAddr string
	// Slots is the number of tasks a worker runs at once (0 for a master).
	Slots int
	// Problems names the problems a worker can evaluate.
	Problems []string
	// Leaving is set by a node about to leave on purpose, so that its
	// peers can tell a graceful leave from a failure (memberlist v0.7.0
	// reports both through the same callback, without the node's state).
	Leaving bool
}

// MarshalBinary encodes m and checks it against memberlist.MetaMaxSize.
func (m NodeMeta) MarshalBinary() ([]byte, error) {
	if m.Version == 0 {
		m.Version = MetaVersion
	}
	if m.Role != RoleWorker && m.Role != RoleMaster {
		return nil, fmt.Errorf("%w: unknown role %d", ErrBadMeta, m.Role)
	}
	if m.Slots < 0 || m.Slots > MaxMetaSlots {
		return nil, fmt.Errorf("%w: slots %d outside [0, %d]", ErrBadMeta, m.Slots, MaxMetaSlots)
	}
	if len(m.Problems) > MaxMetaProblems {
		return nil, fmt.Errorf("%w: %d problems, at most %d", ErrMetaTooLarge, len(m.Problems), MaxMetaProblems)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	err := errors.Join(
		enc.EncodeArrayLen(metaFields),
		enc.EncodeInt(int64(m.Version)),
		enc.EncodeUint8(uint8(m.Role)),
		enc.EncodeString(m.DataAddr),
		enc.EncodeInt(int64(m.Slots)),
		enc.EncodeArrayLen(len(m.Problems)),
	)
	for _, p := range m.Problems {
		err = errors.Join(err, enc.EncodeString(p))
	}
	err = errors.Join(err, enc.EncodeBool(m.Leaving))
	if err != nil {
		return nil, fmt.Errorf("grid: encode node metadata: %w", err)
	}
	if buf.Len() > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrMetaTooLarge, buf.Len(), memberlist.MetaMaxSize)
	}
	return buf.Bytes(), nil
}

// ParseNodeMeta decodes a peer's metadata. It never trusts the input: the
// size, every count and every string length are checked against the bytes
// actually present before anything is allocated, and a bad input is an
// error, never a panic.
func ParseNodeMeta(b []byte) (NodeMeta, error) {
	var m NodeMeta
	if len(b) == 0 {
		return m, fmt.Errorf("%w: empty", ErrBadMeta)
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("%w: %d bytes, at most %d", ErrMetaTooLarge, len(b), memberlist.MetaMaxSize)
	}
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)
	n, err := d.DecodeArrayLen()
	if err != nil {
		return m, fmt.Errorf("%w: %w", ErrBadMeta, err)
	}
	if n < 1 {
		return m, fmt.Errorf("%w: %d fields", ErrBadMeta, n)
	}
	if m.Version, err = d.DecodeInt(); err != nil {
		return m, fmt.Errorf("%w: version: %w", ErrBadMeta, err)
	}
	if m.Version != MetaVersion {
		return NodeMeta{}, fmt.Errorf("%w: version %d, this node speaks %d", ErrMetaVersion, m.Version, MetaVersion)
	}
	if n != metaFields {
		return NodeMeta{}, fmt.Errorf("%w: %d fields, want %d", ErrBadMeta, n, metaFields)
	}
	role, err := d.DecodeUint8()
	if err != nil {
		return NodeMeta{}, fmt.Errorf("%w: role: %w", ErrBadMeta, err)
	}
	m.Role = Role(role)
	if m.Role != RoleWorker && m.Role != RoleMaster {
		return NodeMeta{}, fmt.Errorf("%w: unknown role %d", ErrBadMeta, role)
	}
	if m.DataAddr, err = boundedString(d, r); err != nil {
		return NodeMeta{}, fmt.Errorf("%w: data address: %w", ErrBadMeta, err)
	}
	if m.Slots, err = d.DecodeInt(); err != nil {
		return NodeMeta{}, fmt.Errorf("%w: slots: %w", ErrBadMeta, err)
	}
	if m.Slots < 0 || m.Slots > MaxMetaSlots {
		return NodeMeta{}, fmt.Errorf("%w: slots %d outside [0, %d]", ErrBadMeta, m.Slots, MaxMetaSlots)
	}
	np, err := d.DecodeArrayLen()
	if err != nil {
		return NodeMeta{}, fmt.Errorf("%w: problems: %w", ErrBadMeta, err)
	}
	// Each string needs at least one byte, so a count above the bytes
	// left is a lie.
	if np > MaxMetaProblems || np > r.Len() {
		return NodeMeta{}, fmt.Errorf("%w: %d problems", ErrBadMeta, np)
	}
	if np > 0 {
		m.Problems = make([]string, np)
		for i := range m.Problems {
			if m.Problems[i], err = boundedString(d, r); err != nil {
				return NodeMeta{}, fmt.Errorf("%w: problem %d: %w", ErrBadMeta, i, err)
			}
		}
	}
	if m.Leaving, err = d.DecodeBool(); err != nil {
		return NodeMeta{}, fmt.Errorf("%w: leaving: %w", ErrBadMeta, err)
	}
	if r.Len() != 0 {
		return NodeMeta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, r.Len())
	}
	return m, nil
}

// boundedString reads a msgpack string whose claimed length must fit in
// what is left of r (msgpack itself would allocate up to 1 MB on a claim).
// d reads straight from r: a *bytes.Reader is used unbuffered.
func boundedString(d *msgpack.Decoder, r *bytes.Reader) (string, error) {
	n, err := d.DecodeBytesLen()
	if err != nil {
		return "", err
	}
	if n <= 0 {
		return "", nil
	}
	if n > r.Len() {
		return "", fmt.Errorf("string of %d bytes with %d left", n, r.Len())
	}
	buf := make([]byte, n)
	if err := d.ReadFull(buf); err != nil {
		return "", err
	}
	return string(buf), nil
}
