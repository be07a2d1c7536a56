"""Tests of esgrid_plugin, under the standard library's unittest alone:

    /usr/bin/python3 -m unittest discover -s sdk/python -v

(go test ./problems/plugin -run TestPythonSDK runs them too.) The Go host's
side, the same plugins under esrun, is tested in Go.
"""

import io
import os
import struct
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import esgrid_plugin as sdk  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "plugins", "sphere-py", "sphere.py")


def frame(msg_type, body):
    data = sdk.packb(body)
    return struct.pack(">IB", len(data) + 1, msg_type) + data


def read_frames(data):
    """Every (type, body) in data, which must be whole frames."""
    out, f = [], io.BytesIO(data)
    while True:
        fr = sdk._read_frame(f)
        if fr is None:
            return out
        out.append(fr)


class FlushedOnly(io.RawIOBase):
    """A stdout whose content is what was flushed: what a pipe's reader
    would see from a buffered writer."""

    def __init__(self):
        self.pending, self.flushed = bytearray(), bytearray()
        self.cond = threading.Condition()

    def writable(self):
        return True

    def write(self, b):
        self.pending += b
        return len(b)

    def flush(self):
        with self.cond:
            self.flushed += self.pending
            self.pending.clear()
            self.cond.notify_all()

    def wait_frames(self, n, timeout=60):
        """Whether n whole frames were flushed within timeout seconds."""
        with self.cond:
            return self.cond.wait_for(lambda: len(read_frames(bytes(self.flushed))) >= n, timeout)


class Codec(unittest.TestCase):
    def test_readme_examples(self):
        # The README's bytes: the result {"id": 7, "f": 4.25} and the eval
        # {"id": 7, "x": [0.5, -2.0]}.
        self.assertEqual(frame(3, {"id": 7, "f": 4.25}).hex(" "),
                         "00 00 00 11 03 82 a2 69 64 07 a1 66 cb 40 11 00 00 00 00 00 00")
        ev = bytes.fromhex("00 00 00 1b 02 82 a2 69 64 07 a1 78 92 cb 3f e0 00 00 00 00 00 00 "
                           "cb c0 00 00 00 00 00 00 00")
        self.assertEqual(read_frames(ev), [(2, {"id": 7, "x": [0.5, -2.0]})])

    def test_round_trip(self):
        values = [None, True, False, 0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1,
                  -1, -32, -33, -128, -129, -32768, -32769, -2**31, -2**31 - 1, -2**63,
                  0.0, -0.0, 1.5, 1e300, float("inf"), float("-inf"),
                  "", "a" * 31, "a" * 32, "é" * 200, "b" * 256, "c" * 65536, b"\x00\xff", b"z" * 300,
                  [], list(range(15)), list(range(16)), list(range(70000)), [1.5] * 3, [1.5, 2],
                  {}, {str(i): i for i in range(15)}, {str(i): i for i in range(16)},
                  {"a": {"b": [1, {"c": "d"}]}}]
        for v in values:
            with self.subTest(v=repr(v)[:40]):
                self.assertEqual(sdk.unpackb(sdk.packb(v)), v)
        nan = sdk.unpackb(sdk.packb(float("nan")))
        self.assertNotEqual(nan, nan)

    def test_floats_are_float64(self):
        # 0.1 is not a float32: the host must get its every bit.
        self.assertEqual(sdk.packb(0.1), b"\xcb" + struct.pack(">d", 0.1))
        self.assertEqual(sdk.unpackb(b"\xca" + struct.pack(">f", 0.5)), 0.5)

    def test_too_big_to_encode(self):
        for v in (2**64, -2**63 - 1):
            self.assertRaises(OverflowError, sdk.packb, v)
        self.assertRaises(TypeError, sdk.packb, object())
        deep = []
        for _ in range(10):
            deep = [deep]
        self.assertRaises(ValueError, sdk.packb, deep)

    def test_malformed(self):
        deep = b"\x91" * 9 + b"\x00"
        for name, data in [
            ("empty", b""),
            ("cut float", b"\xcb\x00\x00"),
            ("cut float vector", b"\x92\xcb" + b"\x00" * 8 + b"\xcb\x00"),
            ("string longer than the bytes", b"\xa5abc"),
            ("array count over the bytes", b"\xdd\xff\xff\xff\xff\x00"),
            ("map count over the bytes", b"\x8f\xa1a\x01"),
            ("trailing bytes", b"\x01\x02"),
            ("extension type", b"\xd4\x01\x00"),
            ("reserved code", b"\xc1"),
            ("integer map key", b"\x81\x01\x02"),
            ("duplicate key", b"\x82\xa1a\x01\xa1a\x02"),
            ("too deep", deep),
            ("not UTF-8", b"\xa1\xff"),
        ]:
            with self.subTest(name):
                self.assertRaises(sdk.ProtocolError, sdk.unpackb, data)
        self.assertEqual(sdk.unpackb(b"\x91" * 8 + b"\x00"), [[[[[[[[0]]]]]]]])


def sphere(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


class Serve(unittest.TestCase):
    def run_plain(self, host_frames, f=sphere, **kw):
        out = FlushedOnly()
        args = dict(dim=(1, 0), bounds=(-5.12, 5.12), name="sphere-py")
        args.update(kw)
        sdk.serve(f, stdin=io.BytesIO(b"".join(host_frames)), stdout=out, **args)
        self.assertEqual(out.pending, b"", "a frame was left unflushed")
        return read_frames(bytes(out.flushed))

    def test_hello_answers_and_end(self):
        got = self.run_plain([frame(2, {"id": 1, "x": [1.0, 2.0]}), frame(2, {"id": 2, "x": [0.5], "later": "ignored"})])
        self.assertEqual(got, [
            (1, {"v": 1, "name": "sphere-py", "min_dim": 1, "max_dim": 0, "lower": -5.12, "upper": 5.12,
                 "cancel": False, "nonfinite": False}),
            (3, {"id": 1, "f": 5.0}),
            (3, {"id": 2, "f": 0.25}),
        ])

    def test_hello_options(self):
        hello = self.run_plain([], dim=4, bounds=(-1, 2), name="four", nonfinite=True)[0][1]
        self.assertEqual((hello["min_dim"], hello["max_dim"], hello["lower"], hello["upper"], hello["nonfinite"]),
                         (4, 4, -1.0, 2.0, True))

    def test_an_exception_is_an_error_answer(self):
        def bad(x):
            raise ValueError("x out of the model's range")
        got = self.run_plain([frame(2, {"id": 3, "x": [1.0]}), frame(2, {"id": 4, "x": [1.0]})], f=bad)
        self.assertEqual(got[1:], [(3, {"id": 3, "error": "ValueError: x out of the model's range"}),
                                   (3, {"id": 4, "error": "ValueError: x out of the model's range"})])

    def test_a_cancel_for_a_plain_plugin_is_ignored(self):
        got = self.run_plain([frame(2, {"id": 1, "x": [3.0]}), frame(4, {"id": 1})])
        self.assertEqual(got[1:], [(3, {"id": 1, "f": 9.0})])

    def test_host_breaks_the_protocol(self):
        for name, data in [("a result from the host", frame(3, {"id": 1, "f": 1.0})),
                           ("an eval without x", frame(2, {"id": 1})),
                           ("a string id", frame(2, {"id": "1", "x": [1.0]})),
                           ("a zero length", b"\x00\x00\x00\x00"),
                           ("a length over the cap", struct.pack(">I", sdk.MAX_FRAME + 1)),
                           ("a cut frame", frame(2, {"id": 1, "x": [1.0]})[:-3])]:
            with self.subTest(name):
                self.assertRaises(sdk.ProtocolError, self.run_plain, [data])
                self.assertRaises(sdk.ProtocolError, self.run_plain, [data], f=lambda x, c: 0.0, cancel=True)

    def test_cancel(self):
        # Through a real pipe: the evaluation waits for its cancel while
        # the SDK reads the host's frames.
        r, w = os.pipe()
        inp = os.fdopen(r, "rb", buffering=0)
        host = os.fdopen(w, "wb", buffering=0)
        self.addCleanup(inp.close)
        self.addCleanup(host.close)
        out = FlushedOnly()
        started = threading.Event()
        seen = []

        def slow(x, cancelled):
            if x[0] < 0:
                started.set()
                if not cancelled.wait(60):
                    raise RuntimeError("no cancel came")
                seen.append("cancelled")
                return 1.0  # dropped: a cancelled evaluation answers "cancelled"
            return sphere(x)

        done = threading.Event()
        failure = []

        def run():
            try:
                sdk.serve(slow, dim=1, bounds=(-1, 1), name="slow", cancel=True, stdin=inp, stdout=out)
            except BaseException as e:
                failure.append(e)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        host.write(frame(2, {"id": 1, "x": [-1.0]}))
        self.assertTrue(started.wait(60), "the evaluation did not start")
        host.write(frame(4, {"id": 1}))
        host.write(frame(4, {"id": 0}))  # an old id: ignored
        host.write(frame(2, {"id": 2, "x": [0.5]}))
        self.assertTrue(out.wait_frames(3), "no answer to the second evaluation")
        host.close()  # the host is done: serve returns
        self.assertTrue(done.wait(60), "serve did not return at the end of its input")
        self.assertEqual(failure, [])
        self.assertEqual(out.pending, b"")
        got = read_frames(bytes(out.flushed))
        self.assertTrue(got[0][1]["cancel"])
        self.assertEqual(got[1:], [(3, {"id": 1, "error": "cancelled"}), (3, {"id": 2, "f": 0.25})])
        self.assertEqual(seen, ["cancelled"])


    def test_end_of_input_stops_a_cancellable_evaluation(self):
        # The host is done: the running evaluation is told to stop, and
        # serve returns.
        r, w = os.pipe()
        inp = os.fdopen(r, "rb", buffering=0)
        host = os.fdopen(w, "wb", buffering=0)
        self.addCleanup(inp.close)
        out = FlushedOnly()
        started, done = threading.Event(), threading.Event()

        def endless(x, cancelled):
            started.set()
            return 0.0 if cancelled.wait(60) else 1.0

        def run():
            sdk.serve(endless, dim=1, bounds=(-1, 1), name="endless", cancel=True, stdin=inp, stdout=out)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        host.write(frame(2, {"id": 1, "x": [0.0]}))
        self.assertTrue(started.wait(60), "the evaluation did not start")
        host.close()
        self.assertTrue(done.wait(60), "serve did not return at the end of its input")
        self.assertEqual(read_frames(bytes(out.flushed))[1:], [(3, {"id": 1, "error": "cancelled"})])


class Process(unittest.TestCase):
    """The example plugin as the host runs it: a process on pipes."""

    def test_example(self):
        p = subprocess.run([sys.executable, EXAMPLE], input=frame(2, {"id": 1, "x": [1.0, 2.0, 3.0]}),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = read_frames(p.stdout)
        self.assertEqual(got[0][1]["name"], "sphere-py")
        self.assertEqual(got[1:], [(3, {"id": 1, "f": 14.0})])

    def test_print_goes_to_stderr(self):
        script = ("import sys; sys.path.insert(0, %r)\n"
                  "from esgrid_plugin import serve\n"
                  "def f(x):\n    print('debugging', x)\n    return x[0]\n"
                  "serve(f, dim=1, bounds=(-1, 1), name='chatty')\n") % HERE
        p = subprocess.run([sys.executable, "-c", script], input=frame(2, {"id": 5, "x": [0.5]}),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(read_frames(p.stdout)[1:], [(3, {"id": 5, "f": 0.5})])
        self.assertIn(b"debugging [0.5]", p.stderr)


if __name__ == "__main__":
    unittest.main()
