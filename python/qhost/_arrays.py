"""NumPy arrays as the C API's tensors and back.

Inputs go to the library in place when the array can be read as it is: C-contiguous,
aligned, in native byte order, of one of qhost's dtypes. An array that is only laid out
otherwise (a slice with steps, a transposed view, Fortran order, unaligned) is copied
once into a C-contiguous one. A dtype is never converted: the caller says what the
data is (the library's checks refuse a dtype the model does not declare).

Outputs are not copied either: each returned array is a view of the library's buffer,
which is freed when the last array of that run is garbage-collected.
"""

import ctypes

import numpy as np

from ._native import MAX_RANK, Tensor, lib
from ._status import Error, StatusCode, check

# numpy dtype <-> QhostDType (ONNX's TensorProto codes), native byte order only
DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3,
               np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
               np.dtype(np.float16): 10}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


def dtype_of_code(code):
    return CODE_DTYPES.get(code)


def dtype_name(code):
    dtype = CODE_DTYPES.get(code)
    return dtype.name if dtype is not None else f"dtype code {code}"


class InputTensor:
    """A QhostTensor over `array`, with everything it points into kept alive."""

    def __init__(self, array, name, what):
        if not isinstance(array, np.ndarray):
            raise Error(f"{what}: a numpy.ndarray is needed, not {type(array).__name__}",
                        StatusCode.INVALID_ARGUMENT)
        code = DTYPE_CODES.get(array.dtype)
        if code is None or not array.dtype.isnative:
            raise Error(f"{what}: dtype {array.dtype.str} is not one qhost takes (float32, uint8,"
                        " int8, int32, int64, bool, float16 in native byte order); convert it with"
                        " .astype()", StatusCode.MISMATCH)
        if array.ndim > MAX_RANK:
            raise Error(f"{what}: rank {array.ndim}; qhost takes at most {MAX_RANK}",
                        StatusCode.INVALID_ARGUMENT)
        if not (array.flags.c_contiguous and array.flags.aligned):
            # a fresh allocation (aligned; ascontiguousarray would keep an unaligned one)
            array = np.array(array, order="C", copy=True)
        self.array = array  # what the library reads: the caller's array when not copied
        self.name = name.encode("utf-8") if name is not None else None
        self.shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self.tensor = Tensor(self.name, code, array.ndim, self.shape,
                             array.ctypes.data if array.size else None, array.nbytes)


def tensor_array(inputs):
    """A ctypes array of the QhostTensors of a list of InputTensor."""
    out = (Tensor * max(len(inputs), 1))()
    for i, item in enumerate(inputs):
        out[i] = item.tensor
    return out


class _Values:
    """Owns a QhostValues; freed when no array made from it is alive."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle and lib is not None:
            lib.qhost_values_free(self.handle)
            self.handle = None


class _View:
    """The array interface of one tensor of a _Values; numpy keeps it (and so the
    values) alive as the array's base."""

    def __init__(self, owner, shape, dtype, address):
        self._owner = owner
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str,
                                    "data": (address, False)}


def values_to_dict(handle, names=None):
    """{name: array} of a QhostValues the caller hands over (it is freed with the arrays).
    names: used for tensors the library left unnamed."""
    owner = _Values(handle)
    out = {}
    for i in range(lib.qhost_values_count(handle)):
        t = Tensor()
        check(lib.qhost_values_get(handle, i, ctypes.byref(t)))
        name = t.name.decode("utf-8") if t.name else (names[i] if names else str(i))
        dtype = dtype_of_code(t.dtype)
        if dtype is None:
            raise Error(f"output '{name}': dtype code {t.dtype} is unknown to this package",
                        StatusCode.UNSUPPORTED)
        shape = tuple(t.shape[k] for k in range(t.rank))
        if t.nbytes == 0:
            out[name] = np.empty(shape, dtype)
        else:
            out[name] = np.asarray(_View(owner, shape, dtype, t.data))
    return out
