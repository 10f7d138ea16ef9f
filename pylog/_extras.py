"""Optional dependencies come with pip extras; a missing one is an ImportError naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

# import name -> (what to call it, the extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "polars": ("Polars", "notebook"),
    "pandas": ("pandas", "notebook"),
    "duckdb": ("DuckDB", "notebook"),
    "anywidget": ("anywidget", "notebook"),
    "ipywidgets": ("ipywidgets", "notebook"),
    "pyspark": ("PySpark", "spark"),
    "opentelemetry": ("opentelemetry-proto", "notebook"),
    "plotly": ("plotly", "notebook"),
    "pyiceberg": ("pyiceberg", "iceberg"),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message says which extra brings it."""


def require(module: str, feature: str) -> ModuleType:
    """Import `module` for `feature` (e.g. ``"to_polars()"``), or raise MissingExtraError saying
    ``pip install 'pylog[extra]'``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is None or exc.name.split(".")[0] != top:
            raise
        name, extra = EXTRAS.get(top, (top, None))
        hint = f"pip install 'pylog[{extra}]'" if extra else f"pip install {top}"
        raise MissingExtraError(f"{feature} needs {name}, which is not installed: {hint}", name=top) from None
