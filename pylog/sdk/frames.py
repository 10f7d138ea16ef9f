"""``as_=``: the frame type an SDK call hands back (Arrow, Polars or pandas), one rule for all."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pylog._extras import require

FRAME_TYPES = ("arrow", "polars", "pandas")


def check_frame_type(as_: str) -> str:
    if as_ not in FRAME_TYPES:
        raise ValueError(f"as_ must be one of {', '.join(map(repr, FRAME_TYPES))}, not {as_!r}")
    if as_ != "arrow":
        require(as_, f"as_={as_!r}")
    return as_


def to_frame(data: pa.Table | pa.RecordBatch, as_: str) -> Any:
    """`data` as Arrow (unchanged), a Polars DataFrame or a pandas DataFrame."""
    if as_ == "arrow":
        return data
    if as_ == "polars":
        pl = require("polars", "as_='polars'")
        return pl.from_arrow(data)
    require("pandas", "as_='pandas'")
    return data.to_pandas()
