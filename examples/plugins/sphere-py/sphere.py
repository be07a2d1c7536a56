#!/usr/bin/python3
"""sphere-py: an esgrid problem plugin in Python.

It evaluates the sphere function, f(x) = sum of x_i squared, in any
dimension, on the box [-5.12, 5.12]: the same numbers as esgrid's built-in
"sphere", bit for bit (the sum is computed in the same order, in IEEE
doubles). Replace sphere() by your own fitness function and the name and
box in HELLO by yours.

It needs only Debian's python3-msgpack (apt-get install python3-msgpack),
which is why the first line names /usr/bin/python3. The protocol is in
esgrid's docs/plugins.md.

List it on a worker with
    esworker -join MASTER -key-file K -plugin sphere-py=/path/to/sphere.py
"""

import struct
import sys

import msgpack

MSG_HELLO, MSG_EVAL, MSG_RESULT, MSG_CANCEL = 1, 2, 3, 4
MAX_FRAME = 4 << 20  # type byte + body, as the host caps it

HELLO = {
    "v": 1,               # protocol version
    "name": "sphere-py",  # must equal the name the plugin is listed under
    "min_dim": 1,
    "max_dim": 0,         # 0: no upper limit
    "lower": -5.12,
    "upper": 5.12,
    "cancel": False,      # we do not honour cancels: the host kills us instead
}


def sphere(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


def read_exactly(f, n):
    """n bytes from f; None at a clean end of input, EOFError inside."""
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            if not buf:
                return None
            raise EOFError("input ended inside a frame")
        buf += chunk
    return bytes(buf)


def read_frame(f):
    """(type, body) of the next frame, or None when the host is done."""
    head = read_exactly(f, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n == 0 or n > MAX_FRAME:
        raise ValueError("bad frame length %d" % n)
    data = read_exactly(f, n)
    if data is None:
        raise EOFError("input ended inside a frame")
    return data[0], msgpack.unpackb(data[1:], raw=False)


def write_frame(f, msg_type, body):
    data = msgpack.packb(body, use_bin_type=True)
    f.write(struct.pack(">IB", len(data) + 1, msg_type) + data)
    f.flush()


def main():
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    # Frames only on the real stdout: a stray print() goes to stderr,
    # which the worker logs, instead of breaking the protocol.
    sys.stdout = sys.stderr
    write_frame(out, MSG_HELLO, HELLO)
    while True:
        frame = read_frame(inp)
        if frame is None:
            return 0  # the host closed our input: exit
        msg_type, body = frame
        if msg_type == MSG_EVAL:
            try:
                answer = {"id": body["id"], "f": float(sphere(body["x"]))}
            except Exception as e:  # a bad vector fails its task, not the plugin
                answer = {"id": body["id"], "error": "%s: %s" % (type(e).__name__, e)}
            write_frame(out, MSG_RESULT, answer)
        # MSG_CANCEL never comes: HELLO says cancel is False.


if __name__ == "__main__":
    sys.exit(main())
