"""pylog as its users install it: the sdist and the wheel built from this checkout (`python -m build`)
hold every module and data file, and the wheel, installed into a new virtualenv, runs the README's quick
start with the source tree nowhere on the path.

The virtualenv gets the wheel and its declared dependencies through pip (at the versions of the running
test environment, so the package cache serves them), and pytest: the quick start runs there (``pylog
broker``, kafka-python producing and consuming, `pylog.read_topic`, ``pylog topic list``) and so does a
test file using the ``kafka_topic`` fixture. Then the running environment's other packages are made
visible behind the venv's own (a ``.pth`` file listing a directory of links to them, pylog's own
excluded) so that every module of the installed package, optional extras included, is imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# installed package directory -> source directory (pyproject.toml's package-dir)
SOURCES = {
    "pylog": "pylog", "pylog/protocol": "protocol", "pylog/storage": "storage", "pylog/widgets": "widgets",
}
DATA = ("*.json", "*.md", "*.js", "*.css", "*.pyi")
EXTENSIONS = ("pylog/protocol/records/_crecords", "pylog/storage/_clayout", "pylog/schema_registry/_cavro")


def source_files() -> dict[str, Path]:
    """What the wheel must hold: installed path -> file of the checkout (modules and data files)."""
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    out = {}
    for rel in tracked:
        path = Path(rel)
        for installed, src in sorted(SOURCES.items(), key=lambda kv: -len(kv[1])):
            if path.parts[0] == src and (path.suffix == ".py" or any(path.match(p) for p in DATA)):
                out[str(Path(installed, *path.parts[1:]))] = REPO / path
                break
    return out


@dataclass
class Dist:
    wheel: Path
    sdist: Path
    build_s: float


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """sdist, then a wheel from that sdist, built from a copy of the files a clone of this checkout has."""
    root = tmp_path_factory.mktemp("dist")
    src, out = root / "src", root / "out"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    t0 = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, f"python -m build failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return Dist(wheels[0], sdists[0], time.monotonic() - t0)


def test_wheel_holds_every_module_and_data_file(dist: Dist) -> None:
    import pylog

    names = set(zipfile.ZipFile(dist.wheel).namelist())
    missing = sorted(set(source_files()) - names)
    assert not missing, f"the wheel lacks {missing}"
    assert f"pylog-{pylog.__version__}.dist-info/entry_points.txt" in names
    entry_points = zipfile.ZipFile(dist.wheel).read(f"pylog-{pylog.__version__}.dist-info/entry_points.txt")
    assert b"pylog = pylog.cli:main" in entry_points and b"pylog = pylog.testing" in entry_points
    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc"):
        # a compiler is here: the C accelerators are built (without one, their pure-Python twins serve)
        for ext in EXTENSIONS:
            assert any(n.startswith(ext) and n.endswith(".so") for n in names), f"{ext} was not built"
    print(f"wheel {dist.wheel.name}: {dist.wheel.stat().st_size / 1024:.0f} KiB, "
          f"sdist {dist.sdist.stat().st_size / 1024:.0f} KiB, built in {dist.build_s:.1f}s")


def test_sdist_holds_every_source(dist: Dist) -> None:
    top = dist.sdist.name.removesuffix(".tar.gz")
    with tarfile.open(dist.sdist) as tar:
        names = {n.removeprefix(f"{top}/") for n in tar.getnames()}
    expected = {str(p.relative_to(REPO)) for p in source_files().values()}
    expected |= {"setup.py", "pyproject.toml", "README.md", "protocol/records/_crecords.c",
                 "storage/_clayout.c", "pylog/schema_registry/_cavro.c"}
    missing = sorted(expected - names)
    assert not missing, f"the sdist lacks {missing}"


# ------------------------------------------------------------------------ the wheel in a new virtualenv


@dataclass
class Venv:
    root: Path
    python: Path
    bin: Path
    env: dict[str, str]
    work: Path  # the working directory: far from the checkout

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(list(args), cwd=self.work, env=self.env, capture_output=True, text=True,
                             timeout=timeout, check=False)
        if check:
            assert out.returncode == 0, (f"{' '.join(args)} failed:\n"
                                         f"{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
        return out


def _installed_versions() -> list[str]:
    """This environment's packages as pins (pip constraints), pylog excepted."""
    pins = {}
    for d in importlib.metadata.distributions():
        name = d.metadata["Name"]
        if name and name.lower() != "pylog":
            pins[name.lower()] = f"{name}=={d.version}"
    return sorted(pins.values())


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("wheel-venv")
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    pins = root / "constraints.txt"
    pins.write_text("\n".join(_installed_versions()) + "\n")
    # pip of this environment installs into the new one: the wheel, its dependencies, pytest
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-input", "--quiet",
         "--no-compile", "--disable-pip-version-check", "-c", str(pins), str(dist.wheel), "pytest"],
        capture_output=True, text=True, timeout=600, check=False)
    assert installed.returncode == 0, f"pip install of the wheel failed:\n{installed.stderr[-5000:]}"
    work = root / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYSPARK_", "VIRTUAL_ENV", "PYLOG_"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    print(f"venv with the wheel and its dependencies in {time.monotonic() - t0:.1f}s")
    yield Venv(root / "venv", python, python.parent, env, work)
    shutil.rmtree(root / "venv", ignore_errors=True)  # hundreds of MB (pyarrow, numpy)


def test_the_wheel_runs_the_quick_start(venv: Venv) -> None:
    import pylog

    where = venv.run(str(venv.python), "-c", "import pylog, sys; print(pylog.__file__, sys.path)").stdout
    assert where.startswith(str(venv.root)), where
    assert str(REPO) not in where, f"the checkout is on the path: {where}"
    assert venv.run("pylog", "--version").stdout.strip() == f"pylog {pylog.__version__}"

    # README quick start: `pylog broker` (data in ./pylog-data), on a free port rather than 9092
    broker = subprocess.Popen([str(venv.bin / "pylog"), "broker", "--listen", "127.0.0.1:0"], cwd=venv.work,
                              env=venv.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        found = re.search(r"pylog broker listening on 127\.0\.0\.1:(\d+), data in (.+)$", line)
        assert found, f"no listening line: {line!r}\n{'' if broker.poll() is None else broker.stderr.read()}"
        address = f"127.0.0.1:{found.group(1)}"
        assert Path(found.group(2)) == venv.work / "pylog-data"
        quick_start = f"""
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
import pylog

producer = KafkaProducer(bootstrap_servers="{address}", compression_type="zstd")
producer.send("demo", key=b"k4", value=b"from python", headers=[("source", b"py")]).get(timeout=10)
producer.close()
consumer = KafkaConsumer(bootstrap_servers="{address}", group_id="readme", auto_offset_reset="earliest",
                         consumer_timeout_ms=2000)
consumer.assign([TopicPartition("demo", 0)])
for record in consumer:
    print("consumed", record.offset, record.key, record.value, record.headers)
consumer.close()
table = pylog.read_topic("demo", bootstrap_servers="{address}", include_headers=True)
print("over kafka", table.column("value").to_pylist(), table.schema.field("timestamp").type)
local = pylog.read_topic("demo", data_dir="./pylog-data")
print("from the data directory", local.column("key").to_pylist())
"""
        out = venv.run(str(venv.python), "-c", quick_start).stdout
        assert "consumed 0 b'k4' b'from python' [('source', b'py')]" in out
        assert "over kafka [b'from python'] timestamp[ms, tz=UTC]" in out
        assert "from the data directory [b'k4']" in out
        venv.run("pylog", "topic", "create", "clicks", "-p", "3", "-b", address)
        listed = venv.run("pylog", "topic", "list", "-b", address).stdout
        assert re.search(r"^demo\s", listed, re.M) and re.search(r"^clicks\s+3\s", listed, re.M), listed
    finally:
        broker.terminate()
        broker.wait(30)
    assert broker.returncode == 0


def test_a_user_test_file_gets_a_real_broker(venv: Venv) -> None:
    """`pip install pylog` and pytest: a test asking for ``kafka_topic`` runs against a real broker."""
    (venv.work / "test_user.py").write_text('''
from kafka import KafkaConsumer


def test_x(kafka_broker, kafka_topic):
    kafka_broker.produce(kafka_topic, [b"hello", b"world"], keys=[b"a", b"b"])
    consumer = KafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    assert [(m.key, m.value) for m in consumer] == [(b"a", b"hello"), (b"b", b"world")]
    consumer.close()
''')
    out = venv.run(str(venv.python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_user.py")
    assert "1 passed" in out.stdout, out.stdout


@pytest.fixture(scope="module")
def everything(venv: Venv) -> Iterator[Venv]:
    """The venv, with this environment's other packages (the extras' libraries) behind its own."""
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(venv.run(str(venv.python), "-c", purelib).stdout.strip())
    links = venv.root.parent / "others"
    links.mkdir(exist_ok=True)
    ours = Path(sysconfig.get_path("purelib"))
    for entry in ours.iterdir():
        name = entry.name.lower()
        if name.startswith(("pylog", "__editable__", "_pylog")) or name.endswith(".pth"):
            continue
        (links / entry.name).symlink_to(entry)
    (site / "zz-test-environment.pth").write_text(f"{links}\n")
    yield venv
    (site / "zz-test-environment.pth").unlink()


def test_every_module_of_the_installed_package_imports(everything: Venv) -> None:
    code = """
import importlib, pathlib, sys
import pylog
root = pathlib.Path(pylog.__file__).parent
assert str(root).startswith(sys.prefix), root
names = sorted(".".join(("pylog", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
               for p in root.rglob("*.py") if p.name != "__main__.py")
for name in names:
    importlib.import_module(name)
from pylog.protocol.records import _crecords
from pylog.storage import _clayout
from pylog.schema_registry import _cavro
print(len(names), "modules")
"""
    out = everything.run(str(everything.python), "-c", code, timeout=300).stdout
    expected = [p for p in source_files() if p.endswith(".py") and not p.endswith("__main__.py")]
    assert int(out.split()[0]) == len(expected), out
