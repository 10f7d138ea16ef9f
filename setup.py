"""Build the optional C accelerator; pylog falls back to its pure-Python twin without it."""

from setuptools import find_namespace_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.extension import Extension


class OptionalBuildExt(build_ext):
    """A compiler failure leaves the pure-Python implementation in charge instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            print(f"pylog: C accelerator not built ({exc}); using the pure-Python implementation")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"pylog: {ext.name} not built ({exc}); using the pure-Python implementation")


# The installed package `pylog` is assembled from four source directories (pyproject.toml's
# package-dir). Discovery is namespace-aware: every directory holding Python modules is a package of
# the wheel whether or not it has an __init__.py, so a new directory cannot silently be left out.
_SOURCES = {
    "pylog": "pylog",
    "pylog.protocol": "protocol",
    "pylog.storage": "storage",
    "pylog.widgets": "widgets",
}


def _packages() -> list[str]:
    pkgs = []
    for name, where in _SOURCES.items():
        pkgs.append(name)
        found = find_namespace_packages(where, exclude=["*__pycache__*", "tests", "tests.*"])
        pkgs += [f"{name}.{p}" for p in found if not any(p.startswith(f"{n}.") or p == n
                                                           for n in _nested(name))]
    return sorted(set(pkgs))


def _nested(name: str) -> list[str]:
    """Source directories mapped elsewhere are not also packages of their parent."""
    return [n.split(".", 1)[1] for n in _SOURCES if n != name and n.startswith(f"{name}.")]


setup(
    packages=_packages(),
    ext_modules=[
        Extension(
            "pylog.protocol.records._crecords",
            sources=["protocol/records/_crecords.c", "protocol/records/_lz4records.c"],
            depends=["protocol/records/_crecords.h"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "pylog.storage._clayout",
            sources=["storage/_clayout.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "pylog.schema_registry._cavro",
            sources=["pylog/schema_registry/_cavro.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
