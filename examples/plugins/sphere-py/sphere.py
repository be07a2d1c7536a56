#!/usr/bin/python3
"""sphere-py: an esgrid problem plugin in Python.

It evaluates the sphere function, f(x) = sum of x_i squared, in any
dimension, on the box [-5.12, 5.12]: the same numbers as esgrid's built-in
"sphere", bit for bit (the sum is computed in the same order, in IEEE
doubles). Replace sphere() by your own fitness function, and the name,
dimensions and box given to serve() by yours.

It needs only Python 3 and esgrid's Python SDK, the one file
sdk/python/esgrid_plugin.py, which serve() comes from: install it beside
this script (a script's directory is where Python looks first). The
protocol it speaks is in esgrid's docs/plugins.md.

List it on a worker with
    esworker -join MASTER -key-file K -plugin sphere-py=/path/to/sphere.py
"""

import os
import sys

try:
    from esgrid_plugin import serve
except ImportError:  # run from a clone of esgrid: the SDK is in sdk/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "sdk", "python"))
    from esgrid_plugin import serve


def sphere(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


if __name__ == "__main__":
    # name: the NAME it is listed under; dim (1, 0): any dimension from 1;
    # cancel False: a cancel kills the process (sphere is quick anyway).
    serve(sphere, dim=(1, 0), bounds=(-5.12, 5.12), name="sphere-py", cancel=False)
