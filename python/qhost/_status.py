"""qhost.Error and the turning of the C API's status objects and returned strings into
Python values: every C call the package makes goes through check() or take_string()."""

import ctypes
import enum
import os

from ._native import lib


class StatusCode(enum.IntEnum):
    """QhostStatusCode of qhost.h; the library may add codes (Error.code is then a plain int)."""
    FAILED = 1
    IO = 2
    PARSE = 3
    INVALID = 4
    UNSUPPORTED = 5
    LIMIT = 6
    NOMEM = 7
    MISMATCH = 8
    INVALID_ARGUMENT = 9
    CLOSED = 10


class Error(Exception):
    """A failure reported by qhost: str(error) is the library's one-line message, which
    names the file, plugin or input at fault; error.code is a StatusCode (an int when the
    library has a code this package does not know)."""

    def __init__(self, message, code=StatusCode.FAILED):
        super().__init__(message)
        self.message = message
        try:
            self.code = StatusCode(code)
        except ValueError:
            self.code = int(code)

    def __repr__(self):
        name = self.code.name if isinstance(self.code, StatusCode) else self.code
        return f"qhost.Error({self.message!r}, code={name})"


def check(status):
    """Raise the Error a non-NULL QhostStatus carries, freeing the status."""
    if not status:
        return
    try:
        code = lib.qhost_status_code(status)
        message = (lib.qhost_status_message(status) or b"").decode("utf-8", "replace")
    finally:
        lib.qhost_status_free(status)
    raise Error(message, code)


def take_string(address):
    """The text of a `char *` the library handed over (None for NULL), freed here."""
    if not address.value:
        return None
    try:
        return ctypes.string_at(address.value).decode("utf-8", "replace")
    finally:
        lib.qhost_string_free(address.value)
        address.value = None


def encode_path(path):
    """A path argument (str, bytes or os.PathLike) as the bytes the C API takes."""
    return os.fsencode(path)
