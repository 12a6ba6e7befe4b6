"""What a grading child sends the grader: JSON lines that carry data, never code.

The learner's results cross from the child process to the grader as JSON, never as pickles: the
grader decodes data and runs nothing the child sent. `encode` tags each value so that `decode`
gives back exactly the types `same` would have seen in one process:

* None and bool as JSON; int, float and str tagged; tuple, list and dict (keys too) element by
  element;
* a NumPy array or scalar as the base64 of its `np.save(..., allow_pickle=False)` bytes, a scalar
  flagged so that it comes back a NumPy scalar of its dtype;
* anything else as the array `np.asarray` makes of it when that is numeric, else as an `Other`:
  only the name of its type crosses, and an Other equals nothing.

`encode` raises `TooBig` past its `limit` of bytes; `decode` raises ValueError for anything
malformed, whatever the child wrote.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re

import numpy as np

__all__ = ["LIMIT_BYTES", "Other", "TooBig", "decode", "encode", "line", "parse"]

LIMIT_BYTES = 64 * 2**20  # one exercise's encoded results; more is reported as too big
DEPTH = 40  # containers nested deeper are sent as an Other


class TooBig(ValueError):
    """The results do not fit in the limit."""


class Other:
    """A value the wire does not carry (a function, a custom object): equal to nothing."""

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<a {type(self).__name__}>"


def encode(value, limit: int = LIMIT_BYTES):
    """`value` as JSON-able data, within `limit` bytes (else TooBig)."""
    return _encode(value, [limit], 0)


def _spend(budget, n):
    budget[0] -= n
    if budget[0] < 0:
        raise TooBig(f"over {LIMIT_BYTES // 2**20} MB")


def _array(x, budget, scalar):
    a = np.asarray(x)
    if a.dtype.hasobject:  # np.save would need pickle
        return ["other", type(x).__name__]
    _spend(budget, a.nbytes * 4 // 3 + 200)  # before building it
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=False)
    return ["array", base64.b64encode(buffer.getvalue()).decode("ascii"), scalar]


def _encode(x, budget, depth):
    _spend(budget, 16)
    if depth > DEPTH:
        return ["other", type(x).__name__]
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return _array(x, budget, isinstance(x, np.generic))
    if isinstance(x, int):
        text = int.__repr__(x) if x.bit_length() < 10_000 else None
        if text is not None:
            _spend(budget, len(text))
            return ["int", text]
    elif isinstance(x, float):
        return ["float", float(x)]
    elif isinstance(x, str):
        _spend(budget, len(x))
        return ["str", str.__str__(x)]
    elif isinstance(x, (tuple, list)):
        tag = "tuple" if isinstance(x, tuple) else "list"
        return [tag, [_encode(v, budget, depth + 1) for v in x]]
    elif isinstance(x, dict):
        return ["dict", [[_encode(k, budget, depth + 1), _encode(v, budget, depth + 1)]
                         for k, v in x.items()]]
    else:
        try:
            a = np.asarray(x)
        except Exception:  # not array-like
            a = None
        if a is not None and a.dtype.kind in "biufc":
            return _array(a, budget, False)
    return ["other", type(x).__name__]


def decode(data, depth=0):
    """The value `encode` gave `data` for; ValueError if `data` is not what encode gives."""
    if depth > DEPTH + 1:
        raise ValueError("nested too deep")
    if data is None or isinstance(data, bool):
        return data
    if not (isinstance(data, list) and data and isinstance(data[0], str)):
        raise ValueError(f"not a tagged value: {str(data)[:40]}")
    tag, rest = data[0], data[1:]
    if tag == "int" and len(rest) == 1 and isinstance(rest[0], str):
        return int(rest[0])
    if tag == "float" and len(rest) == 1 and isinstance(rest[0], (int, float)) \
            and not isinstance(rest[0], bool):
        return float(rest[0])
    if tag == "str" and len(rest) == 1 and isinstance(rest[0], str):
        return rest[0]
    if tag in ("tuple", "list") and len(rest) == 1 and isinstance(rest[0], list):
        items = [decode(v, depth + 1) for v in rest[0]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict" and len(rest) == 1 and isinstance(rest[0], list):
        if not all(isinstance(p, list) and len(p) == 2 for p in rest[0]):
            raise ValueError("a dict is a list of pairs")
        try:
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in rest[0]}
        except TypeError as error:  # an unhashable key
            raise ValueError(str(error)) from None
    if tag == "array" and len(rest) == 2 and isinstance(rest[0], str) \
            and isinstance(rest[1], bool):
        return _load(rest[0], rest[1])
    if tag == "other" and len(rest) == 1 and isinstance(rest[0], str):
        name = re.sub(r"\W", "_", rest[0])[:60] or "object"
        return type(name if name[0].isalpha() else "_" + name, (Other,), {})()
    raise ValueError(f"unknown value {tag[:20]!r}")


def _load(text, scalar):
    raw = base64.b64decode(text, validate=True)
    buffer = io.BytesIO(raw)
    version = np.lib.format.read_magic(buffer)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(buffer)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(buffer)
    else:
        raise ValueError(f"npy version {version}")
    if dtype.hasobject or math.prod(shape) * dtype.itemsize > len(raw):  # no pickle, no lies
        raise ValueError("an array header that does not match its data")
    array = np.load(io.BytesIO(raw), allow_pickle=False)
    if scalar:
        if array.ndim != 0:
            raise ValueError("a scalar of shape " + str(array.shape))
        return array[()]
    return array


def line(**fields) -> bytes:
    """One message: a JSON object on one line."""
    return json.dumps(fields, separators=(",", ":")).encode("utf-8") + b"\n"


def parse(raw: bytes) -> dict:
    """The message of one line; ValueError if it is not a JSON object with a string "t"."""
    try:
        message = json.loads(raw)
    except (RecursionError, UnicodeDecodeError) as error:
        raise ValueError(type(error).__name__) from None
    if not (isinstance(message, dict) and isinstance(message.get("t"), str)):
        raise ValueError("not a message")
    return message
