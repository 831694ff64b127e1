#!/usr/bin/python3
"""Write the tiny numpy-made fixtures that tests/unit/test_npy.c checks value by value.

Run from this directory: /usr/bin/python3 make_fixtures.py (numpy 1.24 made the committed files).
"""
import io
import warnings
import zipfile

import numpy as np

np.save("f32_2x3.npy", (np.arange(6, dtype=np.float32) / 4 - 0.5).reshape(2, 3))
np.save("u8.npy", np.array([0, 1, 127, 128, 255], dtype=np.uint8))
np.save("i8.npy", np.array([-128, -1, 0, 1, 127], dtype=np.int8))
np.save("i32.npy", np.array([[-2**31, -1], [0, 2**31 - 1]], dtype=np.int32))
np.save("i64.npy", np.array([-2**63, -1, 0, 2**63 - 1], dtype=np.int64))
np.save("bool.npy", np.array([True, False, True]))
np.save("scalar_f32.npy", np.float32(3.5))
with open("v2_f32.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([[1.5, -2.0], [0.25, 8.0]], dtype=np.float32), version=(2, 0))
np.savez("two.npz", weights=np.array([1, 2, 3], dtype=np.int32), x=np.array([[0.5], [-0.5]], dtype=np.float32))
np.savez_compressed("compressed.npz", a=np.zeros((4, 4), dtype=np.uint8) + 7,
                    b=np.array([-1, 2, -3], dtype=np.int64))

# Hostile archives: a member that is not .npy, and the same member twice.
with zipfile.ZipFile("not_npy_member.npz", "w") as z:
    z.writestr("readme.txt", "hello")
warnings.filterwarnings("ignore", "Duplicate name")
buf = io.BytesIO()
np.save(buf, np.array([1], dtype=np.uint8))
with zipfile.ZipFile("duplicate_member.npz", "w") as z:
    z.writestr("a.npy", buf.getvalue())
    z.writestr("a.npy", buf.getvalue())
with zipfile.ZipFile("truncated_member.npz", "w") as z:
    z.writestr("t.npy", buf.getvalue()[:-1])
