"""Pure-Python twin of the ``_cavro`` accelerator (same interface, same results, slower)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

K_NULL, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_STRING, K_ENUM, K_FIXED = range(9)
_WIDTH = {K_BOOLEAN: 1, K_INT: 4, K_ENUM: 4, K_FLOAT: 4, K_LONG: 8, K_DOUBLE: 8}


class _Bad(Exception):
    pass


def _long(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Bad
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    v &= (1 << 64) - 1
    return (v >> 1) ^ -(v & 1), pos


def decode_flat(
    fields: Sequence[tuple[int, int, int]], data: Any, offsets: Any, skip: int, null_on_error: bool
) -> tuple[list[tuple[bytearray, ...]], bytearray, int]:
    buf = bytes(data)
    offs = struct.unpack(f"<{len(bytes(offsets)) // 8}q", bytes(offsets))
    n = max(len(offs) - 1, 0)
    cols: list[dict[str, Any]] = []
    for kind, nb, size in fields:
        width = size if kind == K_FIXED else _WIDTH.get(kind, 0)
        cols.append(
            {
                "kind": kind,
                "nb": nb,
                "w": width,
                "valid": bytearray(),
                "values": bytearray(),
                "offsets": [0],
                "data": bytearray(),
            }
        )
    row_ok = bytearray()
    error_row = -1

    def put_null(c: dict[str, Any]) -> None:
        c["valid"].append(0)
        if c["kind"] == K_STRING:
            c["offsets"].append(len(c["data"]))
        else:
            c["values"] += bytes(c["w"])

    for i in range(n):
        a, end = offs[i] + skip, offs[i + 1]
        snapshot = [(len(c["valid"]), len(c["values"]), len(c["offsets"]), len(c["data"])) for c in cols]
        try:
            if a > end or end > len(buf) or offs[i] < 0:
                raise _Bad
            pos = a
            for c in cols:
                if c["nb"] >= 0:
                    branch, pos = _long(buf, pos, end)
                    if branch == c["nb"]:
                        put_null(c)
                        continue
                    if branch != 1 - c["nb"]:
                        raise _Bad
                kind = c["kind"]
                if kind == K_NULL:
                    put_null(c)
                    continue
                if kind == K_BOOLEAN:
                    if pos >= end:
                        raise _Bad
                    c["values"].append(1 if buf[pos] else 0)
                    pos += 1
                elif kind in (K_INT, K_ENUM, K_LONG):
                    v, pos = _long(buf, pos, end)
                    if kind == K_LONG:
                        c["values"] += struct.pack("<q", v)
                    else:
                        c["values"] += struct.pack("<i", ((v + 2**31) % 2**32) - 2**31)
                elif kind == K_STRING:
                    length, pos = _long(buf, pos, end)
                    if length < 0 or length > end - pos:
                        raise _Bad
                    c["data"] += buf[pos : pos + length]
                    pos += length
                    c["offsets"].append(len(c["data"]))
                else:
                    if end - pos < c["w"]:
                        raise _Bad
                    c["values"] += buf[pos : pos + c["w"]]
                    pos += c["w"]
                c["valid"].append(1)
            row_ok.append(1)
        except _Bad:
            if not null_on_error:
                for c, (lv, lval, lo, ld) in zip(cols, snapshot):
                    del c["valid"][lv:], c["values"][lval:], c["offsets"][lo:], c["data"][ld:]
                error_row = i
                break
            row_ok.append(0)
            for c, (lv, lval, lo, ld) in zip(cols, snapshot):
                del c["valid"][lv:], c["values"][lval:], c["offsets"][lo:], c["data"][ld:]
                put_null(c)
    out: list[tuple[bytearray, ...]] = []
    for c in cols:
        if c["kind"] == K_STRING:
            out.append(
                (c["valid"], bytearray(struct.pack(f"<{len(c['offsets'])}i", *c["offsets"])), c["data"])
            )
        else:
            out.append((c["valid"], c["values"]))
    if error_row >= 0:
        row_ok = row_ok[:error_row]
    return out, row_ok, error_row
