"""esgrid_plugin: write an esgrid problem plugin in Python with one call.

    from esgrid_plugin import serve

    def sphere(x):
        return sum(v * v for v in x)

    if __name__ == "__main__":
        serve(sphere, dim=(1, 0), bounds=(-5.12, 5.12), name="sphere-py")

serve() speaks the plugin protocol of esgrid's README ("Problem plugins")
on the standard input and output: it writes the hello, answers every
evaluation with f(x), flushes each frame, turns an exception in f into an
error answer, and returns when the host closes the standard input. A
print() in f goes to stderr, which the host logs, instead of breaking the
protocol.

This file is the whole SDK: copy it beside your plugin. It needs Python 3.8
or later and nothing else: the protocol's msgpack is encoded and decoded
here (the few types it uses), so that a plugin runs on a lab machine or a
cluster node where no msgpack package is installed and none can be.
"""

import queue
import struct
import sys
import threading

__all__ = ["serve", "ProtocolError", "packb", "unpackb"]

VERSION = 1  # the protocol's
MSG_HELLO, MSG_EVAL, MSG_RESULT, MSG_CANCEL = 1, 2, 3, 4
MAX_FRAME = 4 << 20  # the type byte and the body, as the host caps them
MAX_ERROR = 4096  # characters of an error answer kept (the host takes 64 KiB)
MAX_NESTING = 8  # as the host allows


class ProtocolError(Exception):
    """The host sent something that is not the protocol."""


def serve(f, dim, bounds, *, name, cancel=False, nonfinite=False, stdin=None, stdout=None):
    """Serve the problem f as the plugin `name` until the host is done.

    f(x) takes a list of floats and returns f(x), lower is better. With
    cancel=True it is called as f(x, cancelled), where cancelled is a
    threading.Event that the host's cancel sets: a long evaluation checks
    it now and then and returns (or raises) early, and its answer is then
    dropped. Without cancel, the host kills the process on a cancel, which
    costs a start.

    dim is the dimension accepted, an int, or (min, max) with max 0 for any
    from min up. bounds is (lower, upper), the box of every coordinate.
    name must equal the name the plugin is listed under (-plugin
    NAME=PATH). nonfinite=True says NaN and +-Inf are answers the ES ranks
    rather than errors. stdin and stdout (binary files) default to the
    process's own.

    It returns None when the host closes the input; it raises ProtocolError
    if the host sends what it cannot read, BrokenPipeError if the host is
    gone.
    """
    if isinstance(dim, int):
        min_dim, max_dim = dim, dim
    else:
        min_dim, max_dim = dim
    lower, upper = bounds
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    if stdout is None:
        # Frames only on the real stdout: a stray print() goes to stderr.
        sys.stdout = sys.stderr
    writer = _Writer(out)
    writer.send(MSG_HELLO, {
        "v": VERSION, "name": name, "min_dim": min_dim, "max_dim": max_dim,
        "lower": float(lower), "upper": float(upper),
        "cancel": bool(cancel), "nonfinite": bool(nonfinite),
    })
    if cancel:
        _serve_cancellable(f, inp, writer)
    else:
        _serve_plain(f, inp, writer)


def _evaluate(f, eval_id, args):
    """The result frame's body for f(*args)."""
    try:
        return {"id": eval_id, "f": float(f(*args))}
    except Exception as e:  # a bad vector fails its evaluation, not the plugin
        text = ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR]
        return {"id": eval_id, "error": text}


def _serve_plain(f, inp, writer):
    """One evaluation at a time, in this thread: the host sends the next
    eval only once it has the answer."""
    while True:
        frame = _read_frame(inp)
        if frame is None:
            return
        msg_type, body = frame
        if msg_type == MSG_EVAL:
            eval_id, x = _eval_body(body)
            writer.send(MSG_RESULT, _evaluate(f, eval_id, (x,)))
        elif msg_type != MSG_CANCEL:
            raise ProtocolError("a frame of type %d from the host" % msg_type)


def _serve_cancellable(f, inp, writer):
    """Evaluations run in this thread; a reader thread takes the host's
    frames meanwhile, so that a cancel reaches the running one."""
    evals = queue.Queue()
    failure = []

    def read():
        current = None  # (id, Event) of the last eval read
        try:
            while True:
                frame = _read_frame(inp)
                if frame is None:
                    break
                msg_type, body = frame
                if msg_type == MSG_EVAL:
                    eval_id, x = _eval_body(body)
                    current = (eval_id, threading.Event())
                    evals.put((eval_id, x, current[1]))
                elif msg_type == MSG_CANCEL:
                    if current is not None and _int(body, "id") == current[0]:
                        current[1].set()  # one already answered: harmless
                else:
                    raise ProtocolError("a frame of type %d from the host" % msg_type)
        except BaseException as e:
            failure.append(e)
        finally:
            if current is not None:
                current[1].set()  # the host is gone or wrong: stop
            evals.put(None)

    reader = threading.Thread(target=read, name="esgrid-reader", daemon=True)
    reader.start()
    while True:
        item = evals.get()
        if item is None:
            break
        eval_id, x, cancelled = item
        answer = _evaluate(f, eval_id, (x, cancelled))
        if cancelled.is_set():
            answer = {"id": eval_id, "error": "cancelled"}
        writer.send(MSG_RESULT, answer)
    if failure:
        raise failure[0]


def _eval_body(body):
    x = body.get("x")
    if not isinstance(x, list):
        raise ProtocolError("eval without a vector x")
    return _int(body, "id"), x


def _int(body, key):
    v = body.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProtocolError("%r is not an integer: %r" % (key, v))
    return v


class _Writer:
    """Whole frames to the host, one at a time, each flushed: a frame
    left in a buffer is a frame the host never gets."""

    def __init__(self, out):
        self._out = out
        self._lock = threading.Lock()

    def send(self, msg_type, body):
        data = packb(body)
        # The length counts the bytes that follow it: the type byte and
        # the encoded body (not the body's number of keys).
        frame = struct.pack(">IB", len(data) + 1, msg_type) + data
        with self._lock:
            self._out.write(frame)
            self._out.flush()


def _read_exactly(inp, n):
    """n bytes, or None at a clean end of input before the first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = inp.read(n - len(buf))
        if not chunk:
            if not buf:
                return None
            raise ProtocolError("input ended inside a frame")
        buf += chunk
    return bytes(buf)


def _read_frame(inp):
    """(type, body) of the host's next frame, or None when it is done."""
    head = _read_exactly(inp, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n == 0 or n > MAX_FRAME:
        raise ProtocolError("frame length %d outside [1, %d]" % (n, MAX_FRAME))
    data = _read_exactly(inp, n)
    if data is None:
        raise ProtocolError("input ended inside a frame")
    body = unpackb(data[1:])
    if not isinstance(body, dict):
        raise ProtocolError("a frame body that is not a map")
    return data[0], body


# msgpack, the subset the protocol uses: nil, booleans, integers, floats,
# strings, binary, arrays and maps (no extension types). Floats are
# always encoded as float64, so that a value reaches the host bit for bit.

def packb(value):
    """value encoded as msgpack bytes."""
    out = bytearray()
    _pack(value, out, 0)
    return bytes(out)


def _pack(v, out, depth):
    if depth > MAX_NESTING:
        raise ValueError("nesting deeper than %d" % MAX_NESTING)
    if v is None:
        out.append(0xC0)
    elif v is True:
        out.append(0xC3)
    elif v is False:
        out.append(0xC2)
    elif isinstance(v, int):
        _pack_int(v, out)
    elif isinstance(v, float):
        out += b"\xcb" + struct.pack(">d", v)
    elif isinstance(v, str):
        b = v.encode("utf-8")
        _pack_head(len(b), out, 0xA0, 32, 0xD9, 0xDA, 0xDB)
        out += b
    elif isinstance(v, (bytes, bytearray)):
        _pack_head(len(v), out, None, 0, 0xC4, 0xC5, 0xC6)
        out += v
    elif isinstance(v, (list, tuple)):
        _pack_head(len(v), out, 0x90, 16, None, 0xDC, 0xDD)
        for item in v:
            _pack(item, out, depth + 1)
    elif isinstance(v, dict):
        _pack_head(len(v), out, 0x80, 16, None, 0xDE, 0xDF)
        for k, item in v.items():
            _pack(k, out, depth + 1)
            _pack(item, out, depth + 1)
    else:
        raise TypeError("cannot encode %s in msgpack" % type(v).__name__)


def _pack_int(v, out):
    if 0 <= v <= 0x7F or -32 <= v < 0:
        out += struct.pack(">b" if v < 0 else ">B", v)
    elif v >= 0:
        for code, fmt, top in ((0xCC, ">B", 0xFF), (0xCD, ">H", 0xFFFF),
                               (0xCE, ">I", 0xFFFFFFFF), (0xCF, ">Q", 0xFFFFFFFFFFFFFFFF)):
            if v <= top:
                out.append(code)
                out += struct.pack(fmt, v)
                return
        raise OverflowError("integer %d does not fit in 64 bits" % v)
    else:
        for code, fmt, bottom in ((0xD0, ">b", -0x80), (0xD1, ">h", -0x8000),
                                  (0xD2, ">i", -0x80000000), (0xD3, ">q", -0x8000000000000000)):
            if v >= bottom:
                out.append(code)
                out += struct.pack(fmt, v)
                return
        raise OverflowError("integer %d does not fit in 64 bits" % v)


def _pack_head(n, out, fix, fix_limit, c8, c16, c32):
    if fix is not None and n < fix_limit:
        out.append(fix | n)
    elif c8 is not None and n <= 0xFF:
        out += struct.pack(">BB", c8, n)
    elif n <= 0xFFFF:
        out += struct.pack(">BH", c16, n)
    else:
        out += struct.pack(">BI", c32, n)


def unpackb(data):
    """The one msgpack value that data is exactly; ProtocolError if it is
    not one (short, trailing bytes, too deep, an extension type)."""
    try:
        v, p = _unpack(data, 0, 0)
    except (struct.error, IndexError):
        raise ProtocolError("msgpack value cut short") from None
    except UnicodeDecodeError as e:
        raise ProtocolError("a string that is not UTF-8: %s" % e) from None
    if p != len(data):
        raise ProtocolError("%d trailing bytes after the msgpack value" % (len(data) - p))
    return v


_FIXED = {  # code: (struct format, size)
    0xCA: (">f", 4), 0xCB: (">d", 8),
    0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
    0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8),
}
_SIZED = {  # code: (kind, width of the length)
    0xC4: ("bin", 1), 0xC5: ("bin", 2), 0xC6: ("bin", 4),
    0xD9: ("str", 1), 0xDA: ("str", 2), 0xDB: ("str", 4),
    0xDC: ("array", 2), 0xDD: ("array", 4),
    0xDE: ("map", 2), 0xDF: ("map", 4),
}
_WIDTH = {1: ">B", 2: ">H", 4: ">I"}
_FLOAT64 = b"\xcb"


def _unpack(b, p, depth):
    c = b[p]
    p += 1
    if c <= 0x7F:
        return c, p
    if c >= 0xE0:
        return c - 0x100, p
    if 0xA0 <= c <= 0xBF:
        return _take(b, p, c & 0x1F, "str")
    if 0x90 <= c <= 0x9F:
        return _container(b, p, c & 0x0F, "array", depth)
    if 0x80 <= c <= 0x8F:
        return _container(b, p, c & 0x0F, "map", depth)
    if c == 0xC0:
        return None, p
    if c == 0xC2:
        return False, p
    if c == 0xC3:
        return True, p
    if c in _FIXED:
        fmt, size = _FIXED[c]
        return struct.unpack_from(fmt, b, p)[0], p + size
    if c in _SIZED:
        kind, width = _SIZED[c]
        (n,) = struct.unpack_from(_WIDTH[width], b, p)
        p += width
        if kind in ("array", "map"):
            return _container(b, p, n, kind, depth)
        return _take(b, p, n, kind)
    raise ProtocolError("unsupported msgpack code 0x%02x" % c)


def _take(b, p, n, kind):
    if n > len(b) - p:
        raise ProtocolError("a %s of %d bytes where %d are left" % (kind, n, len(b) - p))
    raw = b[p:p + n]
    return (raw.decode("utf-8") if kind == "str" else bytes(raw)), p + n


def _container(b, p, n, kind, depth):
    # Every element takes at least one byte: a count the bytes left
    # cannot hold is refused before anything is allocated.
    if n > len(b) - p:
        raise ProtocolError("a %s of %d elements where %d bytes are left" % (kind, n, len(b) - p))
    if depth >= MAX_NESTING:
        raise ProtocolError("nesting deeper than %d" % MAX_NESTING)
    if kind == "array":
        if n and b[p:p + 9 * n:9] == _FLOAT64 * n:
            # A vector of float64s, what an eval carries: in one call.
            return list(struct.unpack_from(">" + "xd" * n, b, p)), p + 9 * n
        items = []
        for _ in range(n):
            v, p = _unpack(b, p, depth + 1)
            items.append(v)
        return items, p
    m = {}
    for _ in range(n):
        k, p = _unpack(b, p, depth + 1)
        v, p = _unpack(b, p, depth + 1)
        if not isinstance(k, str):
            raise ProtocolError("a map key that is not a string: %r" % (k,))
        if k in m:
            raise ProtocolError("the key %r twice in a map" % k)
        m[k] = v
    return m, p
