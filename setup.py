"""Build the optional C accelerator; pylog falls back to its pure-Python twin without it."""

from setuptools import find_packages, setup
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


def _packages() -> list[str]:
    pkgs = ["pylog"] + [f"pylog.{p}" for p in find_packages("pylog")]
    for top in ("protocol", "storage", "widgets"):
        pkgs.append(f"pylog.{top}")
        pkgs += [f"pylog.{top}.{p}" for p in find_packages(top)]
    return pkgs


setup(
    packages=_packages(),
    ext_modules=[
        Extension(
            "pylog.protocol.records._crecords",
            sources=["protocol/records/_crecords.c"],
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
