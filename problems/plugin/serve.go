package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/problems"
)

// Option adjusts what Serve and Main say in the hello.
type Option func(*serveOptions)

type serveOptions struct {
	minDim, maxDim int
	cancel         bool
	nonFinite      bool
	maxFrame       int
}

// Dims says which dimensions the problem accepts: min ≤ n ≤ max, max 0
// for no upper bound. Default: any (1, 0).
func Dims(min, max int) Option {
	return func(o *serveOptions) { o.minDim, o.maxDim = min, max }
}

// NoCancel says the problem's Eval ignores its context, so that the host
// kills the process at once on a cancel rather than wait for an answer.
// By default Serve honours cancels: a cancel cancels Eval's context, as
// problems.Problem asks of long evaluations.
func NoCancel() Option {
	return func(o *serveOptions) { o.cancel = false }
}

// NonFinite says the problem's NaN and ±Inf values are answers (the ES
// ranks them), not evaluation errors: the hello's "nonfinite". esrun
// then takes them as it does with -nonfinite.
func NonFinite() Option {
	return func(o *serveOptions) { o.nonFinite = true }
}

// Serve speaks the plugin protocol for p on r (from the host) and w (to
// the host): a hello, then one answer per evaluation, each evaluation run
// with a context that a cancel from the host cancels. A panic in Eval is
// an error answer, not a crash. Serve returns nil when r ends (the host is
// done), and an error if the host breaks the protocol or w fails; the
// evaluation running then is cancelled and waited for. ctx is the parent
// of every evaluation's context.
func Serve(ctx context.Context, p problems.Problem, r io.Reader, w io.Writer, opts ...Option) error {
	o := serveOptions{minDim: 1, cancel: true, maxFrame: wire.DefaultMaxFrame}
	for _, opt := range opts {
		opt(&o)
	}
	lo, hi := p.Bounds()
	h := Hello{Version: ProtocolVersion, Name: p.Name(), MinDim: o.minDim, MaxDim: o.maxDim, Lower: lo, Upper: hi, Cancel: o.cancel, NonFinite: o.nonFinite}
	if err := h.check(); err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	out := &frameWriter{w: w}
	out.enc = wire.NewEncoder(&out.buf, o.maxFrame)
	if err := out.send(MsgHello, &h); err != nil {
		return err
	}

	type running struct {
		id     uint64
		cancel context.CancelFunc
		done   chan struct{}
	}
	var cur *running
	finish := func() {
		if cur != nil {
			cur.cancel()
			<-cur.done
			cur = nil
		}
	}
	defer finish()
	fr := wire.NewReader(r, o.maxFrame)
	var d wire.Decoder
	for {
		t, body, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("plugin: reading from the host: %w", err)
		}
		switch MsgType(t) {
		case MsgEval:
			var ev Eval
			if err := d.Decode("eval", body, &ev); err != nil {
				return fmt.Errorf("plugin: %w", err)
			}
			if cur != nil {
				// The host sends the next evaluation once it has the
				// answer, which the last one is about to have sent.
				<-cur.done
				cur = nil
			}
			ectx, cancel := context.WithCancel(ctx)
			run := &running{id: ev.ID, cancel: cancel, done: make(chan struct{})}
			cur = run
			go func() {
				defer close(run.done)
				defer cancel()
				f, err := safeEval(ectx, p, ev.X)
				res := Result{ID: ev.ID, F: f}
				if err != nil {
					res.Err = clip(err.Error(), maxErrorText/2)
					if res.Err == "" {
						res.Err = "error"
					}
				}
				if err := out.send(MsgResult, &res); err != nil {
					out.fail(err)
				}
			}()
		case MsgCancel:
			var c Cancel
			if err := d.Decode("cancel", body, &c); err != nil {
				return fmt.Errorf("plugin: %w", err)
			}
			if cur != nil && cur.id == c.ID {
				cur.cancel() // a cancel for an evaluation already answered is ignored
			}
		default:
			return fmt.Errorf("plugin: %w: a %v frame from the host", wire.ErrMalformed, MsgType(t))
		}
		if err := out.failed(); err != nil {
			return err
		}
	}
}

// safeEval calls p.Eval, turning a panic into an error.
func safeEval(ctx context.Context, p problems.Problem, x []float64) (f float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return p.Eval(ctx, x)
}

// frameWriter writes whole frames to the host, one at a time.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
	enc *wire.Encoder
	err error
}

func (fw *frameWriter) send(t MsgType, v any) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return fw.err
	}
	fw.buf.Reset()
	if err := fw.enc.Encode(byte(t), v); err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	if _, err := fw.w.Write(fw.buf.Bytes()); err != nil {
		fw.err = fmt.Errorf("plugin: writing to the host: %w", err)
		return fw.err
	}
	return nil
}

func (fw *frameWriter) fail(err error) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err == nil {
		fw.err = err
	}
}

func (fw *frameWriter) failed() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
}

// Main is the whole main function of a plugin written in Go: it serves p
// on the standard input and output and exits, with status 0 when the host
// closes the standard input, 1 (and the reason on stderr) on an error.
// Where it can (Linux), it first moves the standard output out of reach,
// so that a stray print goes to stderr rather than corrupt the protocol,
// and makes the standard input non-blocking, so that the runtime's poller
// waits for requests: a thread blocked in read(2) would hold up the
// evaluation it has just handed on (measured: 80 µs a round trip instead
// of 20).
func Main(p problems.Problem, opts ...Option) {
	out := protectStdout()
	err := Serve(context.Background(), p, pollableStdin(), out, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Name(), err)
		os.Exit(1)
	}
	os.Exit(0)
}

// PerDim makes one problem of a family with a member per dimension, such
// as the built-ins (problems.Factory): Eval builds the member for x's
// dimension the first time it is seen, and keeps it. Bounds are those of
// the member of dimension minDim, which is built at once to check that it
// can be.
func PerDim(name string, minDim int, factory problems.Factory) (problems.Problem, error) {
	first, err := factory(minDim)
	if err != nil {
		return nil, fmt.Errorf("plugin: %s, dimension %d: %w", name, minDim, err)
	}
	pd := &perDim{name: name, factory: factory, byDim: map[int]problems.Problem{minDim: first}}
	pd.lo, pd.hi = first.Bounds()
	return pd, nil
}

type perDim struct {
	name    string
	lo, hi  float64
	factory problems.Factory
	mu      sync.Mutex
	byDim   map[int]problems.Problem
}

func (pd *perDim) Name() string                   { return pd.name }
func (pd *perDim) Bounds() (lower, upper float64) { return pd.lo, pd.hi }

func (pd *perDim) Eval(ctx context.Context, x []float64) (float64, error) {
	pd.mu.Lock()
	p, ok := pd.byDim[len(x)]
	if !ok {
		var err error
		if p, err = pd.factory(len(x)); err != nil {
			pd.mu.Unlock()
			return 0, fmt.Errorf("%s: dimension %d: %w", pd.name, len(x), err)
		}
		pd.byDim[len(x)] = p
	}
	pd.mu.Unlock()
	return p.Eval(ctx, x)
}
