"""The latest records of a topic, decoded for reading: what `TopicBrowser` shows.

Bounds come from the SDK's scan plan (high watermark / last stable offset per partition); each
partition is read from ``max(log start, end - n)``, then the newest `n` across partitions are kept.
Decoding is per record (only `n` of them): ``"auto"`` shows JSON compactly, other UTF-8 as text and
anything else as hex; ``"utf8"`` and ``"json"`` force one of them; ``"hex"`` shows bytes.
Records in the Schema Registry wire format are decoded through the registry (``"registry"``, and
``"auto"`` when a record carries the magic byte) and shown as JSON of their typed fields.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pylog._extras import require

if TYPE_CHECKING:
    import pandas

DECODINGS = ("auto", "registry", "utf8", "json", "hex")
COLUMNS = ["partition", "offset", "timestamp", "key", "value"]


def decode_bytes(data: bytes | None, how: str = "auto") -> str | None:
    """Bytes as text for a person: see the module doc for `how`."""
    if data is None:
        return None
    if how not in DECODINGS:
        raise ValueError(f"decode must be one of {DECODINGS}, got {how!r}")
    if how == "hex":
        return data.hex(" ")
    if how == "registry":
        how = "auto"  # a record the registry could not decode
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
                 partitions: Sequence[int] | None = None, security: Any = None) -> pa.Table:
    """The newest `n` records of `topic` (newest first) with the SDK's columns, undecoded."""
    from pylog.sdk import scan_topic

    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    plan = scan_topic(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                      partitions=partitions, security=security).plan()
    starts = {str(r.partition): max(r.start, r.end - n) for r in plan}
    ends = {str(r.partition): r.end for r in plan}
    table = scan_topic(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                       partitions=[r.partition for r in plan], starting_offsets={topic: starts},
                       ending_offsets={topic: ends},
                       columns=["partition", "offset", "timestamp", "key", "value"],
                       security=security).to_arrow()
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, [("timestamp", "descending"), ("offset", "descending"),
                                    ("partition", "ascending")])
    return table.take(order).slice(0, n)


def registry_texts(table: pa.Table, topic: str, *, bootstrap_servers: Any = None, data_dir: Any = None,
                   schema_registry_url: str | None = None,
                   security: Any = None) -> dict[str, list[str | None]]:
    """{column: JSON text of each decoded record, None where it is not in the wire format or does not
    decode} for the key and value columns that hold any wire-format record."""
    from pylog.schema_registry.wire import schema_ids
    from pylog.sdk.options import ReadOptions
    from pylog.sdk.scan import decode_context

    out: dict[str, list[str | None]] = {}
    for column in ("key", "value"):
        values = table.column(column).combine_chunks() if table.num_rows else None
        if values is None or not schema_ids(values)[1].any():
            continue
        try:
            options = ReadOptions(data_dir=data_dir, bootstrap_servers=bootstrap_servers, security=security,
                                  schema_registry_url=schema_registry_url, on_decode_error="null")
            decoder = decode_context(options, topic)["registry_decoder"](column=column)
            decoded = decoder(values).to_pylist()
        except (ValueError, ConnectionError):
            continue  # no registry reachable: the bytes are shown as they are
        out[column] = [None if d is None else json.dumps(d, ensure_ascii=False, default=str,
                                                          separators=(", ", ": ")) for d in decoded]
    return out


def records_json(table: pa.Table, decode: str = "auto",
                 decoded: dict[str, list[str | None]] | None = None) -> list[dict[str, Any]]:
    """Rows for display: partition, offset, timestamp (epoch ms), key and value as text (`decoded`: the
    registry's decoding from `registry_texts`, used by ``"auto"`` and ``"registry"``)."""
    out = []
    cols = table.to_pydict() if table.num_rows else {c: [] for c in COLUMNS}
    ts = table.column("timestamp").cast(pa.int64()).to_pylist() if table.num_rows else []
    use = decoded if decoded and decode in ("auto", "registry") else {}
    for i in range(len(cols["offset"])):
        row = {"partition": cols["partition"][i], "offset": cols["offset"][i], "timestamp": ts[i]}
        for column in ("key", "value"):
            text = use[column][i] if column in use else None
            row[column] = text if text is not None else decode_bytes(cols[column][i], decode)
        out.append(row)
    return out


def latest_records(topic: str, n: int = 20, *, bootstrap_servers: Any = None, data_dir: Any = None,
                   partitions: Sequence[int] | None = None, decode: str = "auto",
                   schema_registry_url: str | None = None, security: Any = None) -> pandas.DataFrame:
    """The newest `n` records of `topic`, newest first, as a pandas DataFrame with columns
    ``partition, offset, timestamp, key, value`` (key and value decoded to text, see `decode_bytes`).
    ``security``: Kafka client security settings, as for `pylog.read_topic`."""
    pd = require("pandas", "latest_records()")

    if decode not in DECODINGS:
        raise ValueError(f"decode must be one of {DECODINGS}, got {decode!r}")
    table = latest_table(topic, n, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                         partitions=partitions, security=security)
    decoded = None
    if decode in ("auto", "registry"):
        decoded = registry_texts(table, topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                                 schema_registry_url=schema_registry_url, security=security)
    rows = records_json(table, decode, decoded)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["timestamp"] = pd.to_datetime(df["timestamp"], unit="ms", utc=True)
    return df
