"""Message keys: the key types a topic can declare, and the default partitioner.

Key types
    ``u8``, ``u16``, ``u32``, ``u64``: unsigned integers, stored little-endian in 1/2/4/8 bytes.
    ``charN`` (1 <= N <= 255): a ``str`` whose UTF-8 encoding is at most N bytes, stored as
    those bytes (no padding).

Default partitioner (SplitMix64 finaliser), for ``n`` partitions::

    x = key                               # an integer key
    x = blake2b(utf8(key), 8 bytes, LE)   # a charN key, folded to 64 bits first
    z = (x + 0x9E3779B97F4A7C15)          mod 2**64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9  mod 2**64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB  mod 2**64
    z =  z ^ (z >> 31)
    partition = z mod n

Any callable ``(key, partitions) -> int`` can replace it (``Twain.producer(partitioner=...)``);
producers cache its answer per key, so it must be a pure function of its arguments.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidKeyError, InvalidKeyTypeError

Partitioner = Callable[[Any, int], int]

_MASK64 = (1 << 64) - 1
_INT_WIDTHS = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}
_CHAR_RE = re.compile(r"char([0-9]{1,3})")


@dataclass(frozen=True)
class KeyType:
    """A topic's key type: ``name`` as written in the config, ``width`` in bytes."""

    name: str
    width: int
    is_text: bool

    def encode(self, key: object) -> bytes:
        """Return the stored bytes of ``key``, or raise InvalidKeyError naming the key."""
        if self.is_text:
            return self._encode_text(key)
        if type(key) is not int:
            raise InvalidKeyError(
                f"key {key!r} must be an int for key type {self.name}, not {type(key).__name__}"
            )
        if not 0 <= key < 1 << (8 * self.width):
            raise InvalidKeyError(
                f"key {key} is out of range for key type {self.name} "
                f"(0 .. {(1 << (8 * self.width)) - 1})"
            )
        return key.to_bytes(self.width, "little")

    def _encode_text(self, key: object) -> bytes:
        if not isinstance(key, str):
            raise InvalidKeyError(
                f"key {key!r} must be a str for key type {self.name}, not {type(key).__name__}"
            )
        try:
            data = key.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKeyError(
                f"key {key!r} is not valid UTF-8 text (it holds a lone surrogate)"
            ) from None
        if len(data) > self.width:
            raise InvalidKeyError(
                f"key {key!r} is {len(data)} bytes in UTF-8, longer than {self.name} allows"
            )
        return data

    def decode(self, data: bytes) -> int | str:
        """Return the key stored as ``data``."""
        if self.is_text:
            return data.decode("utf-8")
        return int.from_bytes(data, "little")


def parse_key_type(name: object) -> KeyType:
    """Return the KeyType for ``name`` (``u8``..``u64`` or ``charN``)."""
    if isinstance(name, str):
        if name in _INT_WIDTHS:
            return KeyType(name, _INT_WIDTHS[name], False)
        match = _CHAR_RE.fullmatch(name)
        if match and 1 <= int(match.group(1)) <= 255:
            return KeyType(name, int(match.group(1)), True)
    raise InvalidKeyTypeError(
        f"key_type {name!r} is not valid: use u8, u16, u32, u64 or charN with 1 <= N <= 255"
    )


def splitmix64(x: int) -> int:
    """The SplitMix64 output function of ``x`` (a 64-bit unsigned integer)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def int_partition(key: int, partitions: int) -> int:
    """``default_partitioner`` of an integer key in 0 .. 2**64 - 1, inlined (a producer
    routes every new key through it: one call instead of three)."""
    z = (key + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) % partitions


def default_partitioner(key: int | str, partitions: int) -> int:
    """Map ``key`` to a partition with SplitMix64 (formula in the module docstring)."""
    if isinstance(key, str):
        try:
            data = key.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKeyError(
                f"key {key!r} is not valid UTF-8 text (it holds a lone surrogate)"
            ) from None
        digest = hashlib.blake2b(data, digest_size=8).digest()
        key = int.from_bytes(digest, "little")
    return splitmix64(key & _MASK64) % partitions
