#!/usr/bin/python3
"""Round-trips arrays of every supported dtype and header version through npy.js.

numpy writes each array (v1.0 and v2.0 headers), npy.js reads it and writes it
back, and numpy checks the copy is identical in dtype, shape and bytes.
Exit 0 pass, 1 fail, 77 skip (node missing).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

JS = """
const { readNpy, writeNpy } = require(process.argv[1]);
const a = readNpy(process.argv[2]);
writeNpy(process.argv[3], a.type, a.dims, a.data);
"""


def main():
    node = shutil.which("node")
    if node is None:
        print("SKIP: node not found")
        return 77
    rng = np.random.RandomState(0)
    cases = {
        "f4": rng.randn(2, 3, 4).astype(np.float32),
        "i8": rng.randint(-2**62, 2**62, size=(5,), dtype=np.int64),
        "i4": rng.randint(-2**31, 2**31 - 1, size=(3, 1), dtype=np.int32),
        "i1": rng.randint(-128, 127, size=(7, 2), dtype=np.int8),
        "u1": rng.randint(0, 255, size=(4,), dtype=np.uint8),
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, arr in cases.items():
            for version in ((1, 0), (2, 0)):
                src = os.path.join(tmp, f"{name}.v{version[0]}.npy")
                dst = os.path.join(tmp, f"{name}.v{version[0]}.out.npy")
                with open(src, "wb") as f:
                    np.lib.format.write_array(f, arr, version=version)
                r = subprocess.run([node, "-e", JS, os.path.join(HERE, "npy.js"), src, dst],
                                   capture_output=True, text=True)
                ok = r.returncode == 0
                if ok:
                    back = np.load(dst)
                    ok = back.dtype == arr.dtype and back.shape == arr.shape and \
                        back.tobytes() == arr.tobytes()
                print(f"{'ok  ' if ok else 'FAIL'} {name} v{version[0]}.0 {r.stderr.strip()}")
                failures += not ok
        bad = os.path.join(tmp, "bad.npy")
        with open(bad, "wb") as f:
            f.write(b"not an npy file")
        r = subprocess.run([node, "-e", JS, os.path.join(HERE, "npy.js"), bad, bad + ".out"],
                           capture_output=True, text=True)
        ok = r.returncode != 0 and "bad magic" in r.stderr
        print(f"{'ok  ' if ok else 'FAIL'} bad magic rejected")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
