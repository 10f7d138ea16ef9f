"""`scan_polars`: a topic as a Polars ``LazyFrame`` (Polars' IO-plugin interface).

Polars hands the source the columns it needs, a predicate and a row limit. Columns become the scan's
``columns`` (the others are never read), the simple comparisons of the predicate on ``partition``,
``offset`` and ``timestamp`` become read bounds, and reading stops at the row limit. The bounds only
prune: every yielded frame is still filtered by the whole predicate, so results are exact whatever
the predicate is (one the source does not understand is read without bounds).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pylog._extras import require
from pylog.sdk.offsets import PartitionRange
from pylog.sdk.options import ReadOptions
from pylog.sdk.scan import TopicScan

if TYPE_CHECKING:
    import polars

# comparison operators, each with its mirror (``3 < col`` is ``col > 3``)
_MIRROR = {"Eq": "Eq", "Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt", "GtEq": "LtEq"}
# a pruned read replaces the caller's bounds with the offsets it resolved
_NO_BOUNDS = dict(starting_offsets="earliest", ending_offsets="latest", starting_timestamp=None,
                  ending_timestamp=None)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclasses.dataclass
class ReadBounds:
    """What a predicate lets a read skip: conditions on the partition alone (evaluated on the
    topic's partition numbers), offsets ``[lo, hi)`` (None: no bound) and the first timestamp
    (epoch ms) a record may have."""

    partition_filters: list[polars.Expr] = dataclasses.field(default_factory=list)
    lo: int | None = None
    hi: int | None = None
    min_timestamp: int | None = None

    def bounds_nothing(self) -> bool:
        return not self.partition_filters and self.lo is None and self.hi is None \
            and self.min_timestamp is None

    def keeps(self, partitions: list[int]) -> set[int]:
        """Which of `partitions` the partition conditions keep."""
        pl = require("polars", "scan_polars()")
        frame = pl.DataFrame({"partition": pl.Series(partitions, dtype=pl.Int32)})
        for condition in self.partition_filters:
            frame = frame.filter(condition)
        return set(frame["partition"].to_list())


def scan_polars(topic: str, *, on_batch: Callable[[pa.RecordBatch], None] | None = None,
                **options: Any) -> polars.LazyFrame:
    """A lazy Polars read of `topic`; `options` as for `pylog.scan_topic` (``data_dir=`` or
    ``bootstrap_servers=``, ``decode=``, ``include_headers=``, bounds, ``security=``...).

    Selected columns alone are read; filters on ``partition``, ``offset`` and ``timestamp`` (``==``,
    ``<``, ``<=``, ``>``, ``>=``, ``is_in`` on partitions, joined with ``&``) narrow the partitions
    and offsets read; ``head(n)`` stops reading after `n` rows; batches stream to Polars' streaming
    engine. `on_batch` is called with each record batch read from the topic, before filtering.
    (An upper bound on ``timestamp`` is applied as a filter only: Kafka timestamps need not grow with
    offsets.)"""
    pl = require("polars", "scan_polars()")
    from polars.io.plugins import register_io_source

    if "columns" in options:
        raise ValueError("scan_polars() takes no columns=: select them on the LazyFrame")
    base = TopicScan(topic, ReadOptions(**options))  # bad options fail now, with the SDK's message
    schema: polars.Schema | None = None

    def polars_schema() -> polars.Schema:
        nonlocal schema
        if schema is None:
            # decoded columns take their type from the data: the first batch's
            arrow = base.schema if base.options.decode is None else base.to_arrow_batch_reader().schema
            schema = pl.from_arrow(arrow.empty_table()).schema
        return schema

    def source(with_columns: list[str] | None, predicate: polars.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[polars.DataFrame]:
        wanted = list(with_columns) if with_columns is not None else list(base.columns)
        needed = list(wanted)
        if predicate is not None:
            needed += [c for c in predicate.meta.root_names() if c not in needed]
        scan = pruned_scan(base, predicate)
        if scan is None:
            return
        left = n_rows
        for batch in scan.select(*[c for c in base.columns if c in needed]).to_batches():
            if on_batch is not None:
                on_batch(batch)
            frame = pl.from_arrow(batch)
            if predicate is not None:
                frame = frame.filter(predicate)
            frame = frame.select(wanted)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            step = batch_size or max(frame.height, 1)
            for i in range(0, frame.height, step):
                yield frame.slice(i, step)
            if left is not None and left <= 0:
                return

    return register_io_source(source, schema=polars_schema)


def pruned_scan(base: TopicScan, predicate: polars.Expr | None) -> TopicScan | None:
    """`base` narrowed to what `predicate` can match (None: nothing can match)."""
    ranges = pushed_ranges(base, predicate)
    if ranges is None:
        return base
    if not ranges:
        return None
    topic = base.topic
    return TopicScan(topic, base.options, **{
        **_NO_BOUNDS, "partitions": [r.partition for r in ranges],
        "starting_offsets": {topic: {str(r.partition): r.start for r in ranges}},
        "ending_offsets": {topic: {str(r.partition): r.end for r in ranges}}})


def pushed_ranges(base: TopicScan, predicate: polars.Expr | None) -> list[PartitionRange] | None:
    """The ``[start, end)`` per partition a read filtered by `predicate` needs (None: the predicate
    bounds nothing, read as `base` would)."""
    if predicate is None:
        return None
    bounds = read_bounds(predicate)
    if bounds.bounds_nothing():
        return None
    ranges = base.plan()
    if bounds.partition_filters:
        kept = bounds.keeps([r.partition for r in ranges])
        ranges = [r for r in ranges if r.partition in kept]
    if bounds.min_timestamp is not None and ranges:
        # only the starts matter here (the user's own bounds are in `ranges`, met by max below)
        timed = TopicScan(base.topic, base.options, **{
            **_NO_BOUNDS, "partitions": [r.partition for r in ranges],
            "starting_timestamp": bounds.min_timestamp})
        starts = {r.partition: r.start for r in timed.plan()}
        ranges = [dataclasses.replace(r, start=max(r.start, starts[r.partition])) for r in ranges]
    out = []
    for r in ranges:
        start = r.start if bounds.lo is None else min(max(r.start, bounds.lo), r.end)
        end = r.end if bounds.hi is None else max(min(r.end, bounds.hi), start)
        if end > start:
            out.append(dataclasses.replace(r, start=start, end=min(end, r.end)))
    return out


def read_bounds(predicate: polars.Expr) -> ReadBounds:
    """The bounds the ``&``-joined conjuncts of `predicate` put on ``partition``, ``offset`` and
    ``timestamp``; a conjunct not understood bounds nothing."""
    bounds = ReadBounds()
    for conjunct in _conjuncts(predicate):
        try:
            _narrow(bounds, conjunct)
        except Exception:
            # an expression this module does not understand only costs the pruning, never the
            # answer (the filter still runs)
            continue
    return bounds


def _conjuncts(predicate: polars.Expr) -> list[polars.Expr]:
    """`predicate` split at its top-level ``&``."""
    out: list[polars.Expr] = []
    stack = [predicate]
    while stack:
        expr = stack.pop()
        split = _binary(expr, ("And",))
        if split is None:
            out.append(expr)
        else:
            stack += [split[2], split[1]]
    return out


def _narrow(bounds: ReadBounds, conjunct: polars.Expr) -> None:
    pl = require("polars", "scan_polars()")
    roots = list(dict.fromkeys(conjunct.meta.root_names()))
    if roots == ["partition"]:
        # comparisons of the partition alone: evaluated on the partition numbers
        if _row_wise_on_partition(conjunct):
            pl.DataFrame({"partition": pl.Series([0], dtype=pl.Int32)}).filter(conjunct)
            bounds.partition_filters.append(conjunct)
        return
    if roots not in (["offset"], ["timestamp"]):
        return
    split = _binary(conjunct, tuple(_MIRROR))
    if split is None:
        return
    op, left, right = split
    if _is_column(left, roots[0]):
        literal = right
    elif _is_column(right, roots[0]):
        literal, op = left, _MIRROR[op]
    else:
        return
    if not _is_literal(literal):
        return
    value = pl.select(literal).to_series()[0]
    if roots == ["offset"]:
        _narrow_offsets(bounds, op, value)
    elif op in ("Eq", "Gt", "GtEq"):
        first = _first_ms(value, strict=op == "Gt")
        if first is not None:
            bounds.min_timestamp = max(first, bounds.min_timestamp or first)


# the binary operators read, and how to rebuild each from its two sides
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "And": lambda a, b: a & b, "Or": lambda a, b: a | b, "Eq": lambda a, b: a == b, "Lt": lambda a, b: a < b,
    "LtEq": lambda a, b: a <= b, "Gt": lambda a, b: a > b, "GtEq": lambda a, b: a >= b,
}


def _binary(expr: polars.Expr, ops: tuple[str, ...]) -> tuple[str, polars.Expr, polars.Expr] | None:
    """(operator, left, right) if `expr` is one of `ops` applied to two expressions, else None.

    Read with ``meta.pop`` (the inputs of the outermost node) and ``meta.eq`` (rebuilt from them it
    is the same expression), which hold across Polars versions, unlike a serialized form."""
    try:
        inputs = expr.meta.pop()
    except Exception:
        return None
    if len(inputs) != 2:
        return None
    for left, right in ((inputs[1], inputs[0]), (inputs[0], inputs[1])):
        for op in ops:
            try:
                if expr.meta.eq(_OPERATORS[op](left, right)):
                    return op, left, right
            except Exception:
                continue
    return None


def _row_wise_on_partition(expr: polars.Expr) -> bool:
    """Whether `expr` decides each row from its own partition alone: literal comparisons and
    ``is_in`` joined by ``&`` / ``|`` (not, say, ``== col.max()``, which depends on the other rows)."""
    split = _binary(expr, ("And", "Or"))
    if split is not None:
        return _row_wise_on_partition(split[1]) and _row_wise_on_partition(split[2])
    split = _binary(expr, tuple(_MIRROR))
    if split is not None:
        _, left, right = split
        return (_is_column(left, "partition") and _is_literal(right)) or \
            (_is_column(right, "partition") and _is_literal(left))
    try:
        inputs = expr.meta.pop()
        if len(inputs) != 2:
            return False
        return any(_is_column(column, "partition") and _is_literal(values)
                   and bool(expr.meta.eq(column.is_in(values)))
                   for column, values in ((inputs[1], inputs[0]), (inputs[0], inputs[1])))
    except Exception:
        return False


def _is_literal(expr: polars.Expr) -> bool:
    return bool(expr.meta.is_literal(allow_aliasing=True))


def _is_column(expr: polars.Expr, name: str) -> bool:
    return bool(expr.meta.is_column()) and expr.meta.output_name() == name


def _narrow_offsets(bounds: ReadBounds, op: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    lo = hi = None
    if op == "Eq":
        if value != int(value):
            lo, hi = 0, 0  # no integer offset equals it
        else:
            lo, hi = int(value), int(value) + 1
    elif op == "Gt":
        lo = int(value // 1) + 1
    elif op == "GtEq":
        lo = -int(-value // 1)
    elif op == "Lt":
        hi = -int(-value // 1)
    elif op == "LtEq":
        hi = int(value // 1) + 1
    if lo is not None:
        bounds.lo = lo if bounds.lo is None else max(bounds.lo, lo)
    if hi is not None:
        bounds.hi = hi if bounds.hi is None else min(bounds.hi, hi)


def _first_ms(value: Any, *, strict: bool) -> int | None:
    """The smallest whole-millisecond timestamp ``> value`` (strict) or ``>= value``."""
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        micros = (when - _EPOCH) // dt.timedelta(microseconds=1)
    elif isinstance(value, dt.date):
        micros = (dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc) - _EPOCH) \
            // dt.timedelta(microseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        micros = value * 1000  # an integer compared with the column is in its unit, milliseconds
    else:
        return None
    return micros // 1000 + 1 if strict else -(-micros // 1000)
