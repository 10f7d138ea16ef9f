"""Where a broker's Iceberg tables live: the catalog (pyiceberg) and the warehouse.

Broker configs: ``pylog.iceberg.catalog.type`` is ``sql`` (pyiceberg's SqlCatalog; by default an
SQLite file ``iceberg/catalog.db`` in the data directory) or ``rest`` (an Iceberg REST catalog at
``pylog.iceberg.catalog.uri``). ``pylog.iceberg.warehouse`` is where data and metadata files go
(default ``iceberg/warehouse`` in the data directory). The brokers of a cluster that materialise
topics must share one catalog and warehouse (a REST catalog, or an SQLite file and directory they
all reach), since the partition leader that materialises a topic changes with leadership.

The warehouse is a location URI handed to pyiceberg's FileIO; `io_properties` is the seam for an
object store (endpoint, credentials) in FileIO's property names. Further catalog properties come
from pyiceberg's own configuration (``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__<PROP>``
variables), merged under these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pylog.config_defs import ConfigError

SQL, REST = "sql", "rest"
CATALOG_TYPES = (SQL, REST)
DEFAULT_NAMESPACE = "pylog"
CREATE_RACE_ATTEMPTS = 3  # opens of a new SQL catalog while another process creates its tables


class CatalogConfigError(ConfigError):
    """Iceberg catalog settings that cannot work (reported at broker start)."""


@dataclass(frozen=True)
class CatalogSettings:
    type: str
    uri: str
    warehouse: str
    name: str = "pylog"
    io_properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, get: Any, data_dir: Path) -> CatalogSettings:
        """From broker configs (`get(name)` -> raw value or None) and the broker's data directory."""
        kind = (get("pylog.iceberg.catalog.type") or SQL).strip().lower()
        if kind not in CATALOG_TYPES:
            raise CatalogConfigError(f"pylog.iceberg.catalog.type must be one of {CATALOG_TYPES}, "
                                     f"not {kind!r}")
        uri = get("pylog.iceberg.catalog.uri")
        home = Path(data_dir).resolve() / "iceberg"
        if kind == REST and not uri:
            raise CatalogConfigError("pylog.iceberg.catalog.type=rest needs pylog.iceberg.catalog.uri "
                                     "(the REST catalog's URL)")
        if not uri:
            uri = f"sqlite:///{home / 'catalog.db'}"
        warehouse = get("pylog.iceberg.warehouse") or (home / "warehouse").as_uri()
        if "://" not in warehouse:
            warehouse = Path(warehouse).resolve().as_uri()
        return cls(kind, uri, warehouse, get("pylog.iceberg.catalog.name") or "pylog")

    def properties(self) -> dict[str, str]:
        return {"type": self.type, "uri": self.uri, "warehouse": self.warehouse, **self.io_properties}

    def open(self) -> Any:
        """The pyiceberg catalog (imports pyiceberg; `pylog[iceberg]`)."""
        from pylog._extras import require

        require("pyiceberg", "Iceberg tables")
        from pyiceberg.catalog import load_catalog

        if self.type == SQL and self.uri.startswith("sqlite:///"):
            Path(self.uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        if self.warehouse.startswith("file://"):
            Path(self.warehouse[len("file://"):]).mkdir(parents=True, exist_ok=True)
        for _ in range(CREATE_RACE_ATTEMPTS - 1):
            try:
                return load_catalog(self.name, **self.properties())
            except Exception as exc:  # sqlalchemy's OperationalError, without importing it here
                # a SQL catalog creates its tables when first opened; a broker (or notebook)
                # opening the same new catalog at that moment makes one of the two creates fail
                # with "already exists": the tables are there, so opening again succeeds
                if "already exists" not in str(exc):
                    raise
        return load_catalog(self.name, **self.properties())


def table_identifier(topic: str, configured: str | None) -> str:
    """``pylog.iceberg.table`` or ``pylog.<topic>`` (dots in a topic name become underscores, since
    Iceberg reads them as namespace separators)."""
    if configured:
        return configured if "." in configured else f"{DEFAULT_NAMESPACE}.{configured}"
    return f"{DEFAULT_NAMESPACE}.{topic.replace('.', '_')}"
