"""Progress of long reads and writes through the Kafka protocol: a tqdm bar of records, with the bytes
moved beside it, drawn as a notebook widget in Jupyter and on stderr elsewhere (``tqdm.auto``).

``progress=None`` (the default) shows a bar only for large work: at least `LARGE_RECORDS` records
(or an unknown count) that is still running after `DELAY_S` seconds; ``True`` always shows one,
``False`` never does.
"""

from __future__ import annotations

from typing import Any

LARGE_RECORDS = 100_000
DELAY_S = 1.0


class Progress:
    """Records done (the bar) and bytes moved (its postfix)."""

    def __init__(self, bar: Any) -> None:
        self._bar = bar
        self.records = 0
        self.bytes = 0

    def update(self, records: int, nbytes: int) -> None:
        self.records += records
        self.bytes += nbytes
        self._bar.set_postfix_str(self._bar.format_sizeof(self.bytes, "B", 1024), refresh=False)
        self._bar.update(records)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Silent(Progress):
    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0

    def update(self, records: int, nbytes: int) -> None:
        self.records += records
        self.bytes += nbytes

    def close(self) -> None:
        pass


def progress_bar(progress: bool | None, *, total: int | None, desc: str) -> Progress:
    """A bar for `total` records (None: unknown), or a silent counter when none should show."""
    if progress is False or (progress is None and total is not None and total < LARGE_RECORDS):
        return _Silent()
    if not isinstance(progress, (bool, type(None))):
        raise TypeError(f"progress must be True, False or None (automatic), not {progress!r}")
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=" records", unit_scale=True, dynamic_ncols=True,
               delay=0 if progress else DELAY_S)
    return Progress(bar)
