"""Kafka's key partitioner: ``toPositive(murmur2(key)) % num_partitions``, as the Java client does it.

Two implementations behind one contract: `murmur2` hashes one key in pure Python (the reference twin),
`murmur2_array` hashes a whole Arrow binary column with numpy, one vector step per 4-byte word
position, so a million keys cost a handful of numpy passes instead of a million Python calls.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of `data`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end4 = length & ~3
    for i in range(0, end4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[end4 + 2] << 16
    if tail >= 2:
        h ^= data[end4 + 1] << 8
    if tail >= 1:
        h ^= data[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _binary_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64[n+1], data uint8) of a binary/string array, honouring the array's slice offset."""
    if pa.types.is_large_binary(keys.type) or pa.types.is_large_string(keys.type):
        off_dtype = np.int64
    else:
        off_dtype = np.int32
    bufs = keys.buffers()
    n = len(keys)
    offsets = np.frombuffer(bufs[1], dtype=off_dtype, count=n + 1, offset=keys.offset * off_dtype().itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def murmur2_array(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Signed murmur2 of every value of a binary/string column as int32 (nulls hash as empty keys)."""
    if isinstance(keys, pa.ChunkedArray):
        if keys.num_chunks == 0:
            return np.zeros(0, np.int32)
        return np.concatenate([murmur2_array(c) for c in keys.chunks])
    if pa.types.is_binary_view(keys.type) or pa.types.is_string_view(keys.type):
        keys = keys.cast(pa.large_binary())
    offsets, data = _binary_buffers(keys)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if keys.null_count:
        lengths = np.where(np.asarray(pc.is_valid(keys)), lengths, 0)
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    nwords = lengths >> 2
    # word position i is processed for every key that has more than i whole words; the set shrinks
    active = np.flatnonzero(nwords > 0)
    i = 0
    while active.size:
        pos = starts[active] + 4 * i
        k = (
            data[pos].astype(np.uint32)
            | (data[pos + 1].astype(np.uint32) << 8)
            | (data[pos + 2].astype(np.uint32) << 16)
            | (data[pos + 3].astype(np.uint32) << 24)
        )
        k *= m
        k ^= k >> np.uint32(24)
        k *= m
        h[active] = (h[active] * m) ^ k
        i += 1
        active = active[nwords[active] > i]
    tail = lengths & 3
    tail_start = starts + (nwords << 2)
    for t, shift in ((3, 16), (2, 8)):
        sel = np.flatnonzero(tail >= t)
        if sel.size:
            h[sel] ^= data[tail_start[sel] + (t - 1)].astype(np.uint32) << np.uint32(shift)
    sel = np.flatnonzero(tail >= 1)
    if sel.size:
        h[sel] = (h[sel] ^ data[tail_start[sel]].astype(np.uint32)) * m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray:
    """Vectorised `partition_for_key` over a column (int32; null keys get -1: they have no key partition)."""
    hashed = murmur2_array(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    parts = (hashed % np.uint32(num_partitions)).astype(np.int32)
    if keys.null_count:
        valid = keys.is_valid()
        if isinstance(valid, pa.ChunkedArray):
            valid = valid.combine_chunks()
        parts[~np.asarray(valid.to_numpy(zero_copy_only=False))] = -1
    return parts
