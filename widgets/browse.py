"""The latest records of a topic, decoded for reading: what `TopicBrowser` shows.

Bounds come from the SDK's scan plan (high watermark / last stable offset per partition); each
partition is read from ``max(log start, end - n)``, then the newest `n` across partitions are kept.
Decoding is per record (only `n` of them): ``"auto"`` shows JSON compactly, other UTF-8 as text and
anything else as hex; ``"utf8"`` and ``"json"`` force one of them; ``"hex"`` shows bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import pandas

DECODINGS = ("auto", "utf8", "json", "hex")
COLUMNS = ["partition", "offset", "timestamp", "key", "value"]


def decode_bytes(data: bytes | None, how: str = "auto") -> str | None:
    """Bytes as text for a person: see the module doc for `how`."""
    if data is None:
        return None
    if how not in DECODINGS:
        raise ValueError(f"decode must be one of {DECODINGS}, got {how!r}")
    if how == "hex":
        return data.hex(" ")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if how == "auto":
            return data.hex(" ")
        text = data.decode("utf-8", errors="replace")
    if how == "utf8":
        return text
    stripped = text.strip()
    if how == "json" or stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null"):
        try:
            return json.dumps(json.loads(text), ensure_ascii=False, separators=(", ", ": "))
        except ValueError:
            if how == "json":
                return f"<not JSON> {text}"
    return text


def latest_table(topic: str, n: int = 20, *, bootstrap_servers: Any = None, data_dir: Any = None,
                 partitions: Sequence[int] | None = None) -> pa.Table:
    """The newest `n` records of `topic` (newest first) with the SDK's columns, undecoded."""
    from pylog.sdk import scan_topic

    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    plan = scan_topic(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                      partitions=partitions).plan()
    starts = {str(r.partition): max(r.start, r.end - n) for r in plan}
    ends = {str(r.partition): r.end for r in plan}
    table = scan_topic(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                       partitions=[r.partition for r in plan], starting_offsets={topic: starts},
                       ending_offsets={topic: ends},
                       columns=["partition", "offset", "timestamp", "key", "value"]).to_arrow()
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, [("timestamp", "descending"), ("offset", "descending"),
                                    ("partition", "ascending")])
    return table.take(order).slice(0, n)


def records_json(table: pa.Table, decode: str = "auto") -> list[dict[str, Any]]:
    """Rows for display: partition, offset, timestamp (epoch ms), key and value as text."""
    out = []
    cols = table.to_pydict() if table.num_rows else {c: [] for c in COLUMNS}
    ts = table.column("timestamp").cast(pa.int64()).to_pylist() if table.num_rows else []
    for i in range(len(cols["offset"])):
        out.append({"partition": cols["partition"][i], "offset": cols["offset"][i], "timestamp": ts[i],
                    "key": decode_bytes(cols["key"][i], decode),
                    "value": decode_bytes(cols["value"][i], decode)})
    return out


def latest_records(topic: str, n: int = 20, *, bootstrap_servers: Any = None, data_dir: Any = None,
                   partitions: Sequence[int] | None = None, decode: str = "auto") -> pandas.DataFrame:
    """The newest `n` records of `topic`, newest first, as a pandas DataFrame with columns
    ``partition, offset, timestamp, key, value`` (key and value decoded to text, see `decode_bytes`)."""
    import pandas as pd

    if decode not in DECODINGS:
        raise ValueError(f"decode must be one of {DECODINGS}, got {decode!r}")
    table = latest_table(topic, n, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                         partitions=partitions)
    rows = records_json(table, decode)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["timestamp"] = pd.to_datetime(df["timestamp"], unit="ms")
    return df
