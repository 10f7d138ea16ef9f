"""Apache Iceberg tables kept up to date from topics (topic config ``pylog.iceberg.enable=true``).

The partition leader of a topic's partition 0 runs a materialiser (`pylog.iceberg.materializer`)
around a sans-IO plan (`pylog.iceberg.plan`): it reads committed records through the Kafka
protocol and commits them to the table with pyiceberg (`pylog.iceberg.tables`), the Kafka offsets
travelling in each snapshot's summary so restarts neither skip nor repeat records. `open_catalog`
opens the catalog a broker writes to, with the same defaults, for reading the tables back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def open_catalog(data_dir: Any = None, *, uri: str | None = None, warehouse: str | None = None,
                 type: str = "sql", name: str = "pylog") -> Any:
    """The pyiceberg catalog of a broker's tables: by default the SQLite catalog and warehouse in its
    data directory; otherwise the broker's ``pylog.iceberg.catalog.*`` / ``pylog.iceberg.warehouse``
    values as ``uri`` / ``warehouse`` / ``type`` / ``name``."""
    from pylog.iceberg.catalog import CatalogSettings

    if data_dir is None and (uri is None or (type == "sql" and warehouse is None)):
        raise ValueError("open_catalog needs the broker's data_dir=, or its catalog uri= (and warehouse=)")
    settings = {"pylog.iceberg.catalog.type": type, "pylog.iceberg.catalog.uri": uri,
                "pylog.iceberg.warehouse": warehouse, "pylog.iceberg.catalog.name": name}
    return CatalogSettings.from_config(settings.get, Path(data_dir or ".")).open()
