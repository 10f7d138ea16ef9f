"""Progress bars of reads and writes through the Kafka protocol, against a real ``pylog broker``: a
terminal bar on stderr by default, a notebook widget in a Jupyter kernel, none with progress=False."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from sdk_helpers import Broker, create_topic

import pylog
from pylog.sdk.progress import LARGE_RECORDS

N = LARGE_RECORDS + 20_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("progress-broker")
    b = Broker(root / "data", root / "broker.log")
    yield b
    b.stop()


@pytest.fixture(scope="module")
def big_topic(broker: Broker) -> str:
    topic = f"big-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    values = pa.array([f"value-{i:06d}".encode() for i in range(N)], pa.binary())
    pylog.write_topic(pa.table({"value": values}), topic, bootstrap_servers=broker.bootstrap, progress=False)
    return topic


def _final_bar(err: str) -> str:
    """The last state tqdm drew (it redraws in place with carriage returns)."""
    return re.split(r"[\r\n]+", err.strip())[-1]


def test_write_shows_records_and_bytes(broker: Broker, capfd: pytest.CaptureFixture[str]) -> None:
    topic = f"w-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    table = pa.table({"value": pa.array([b"x" * 100] * N, pa.binary())})
    result = pylog.write_topic(table, topic, bootstrap_servers=broker.bootstrap, progress=True)
    assert result.records == N
    out, err = capfd.readouterr()
    assert out == ""
    bar = _final_bar(err)
    assert bar.startswith(f"writing {topic}: 100%") and "120k/120k" in bar, bar
    assert re.search(r"\d+(\.\d+)?MB", bar), bar  # the bytes sent, beside the records


def test_read_shows_records_and_bytes(broker: Broker, big_topic: str,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    table = pylog.read_topic(big_topic, bootstrap_servers=broker.bootstrap, progress=True)
    assert table.num_rows == N
    out, err = capfd.readouterr()
    bar = _final_bar(err)
    assert out == "" and bar.startswith(f"reading {big_topic}: 100%") and "120k/120k" in bar, bar
    assert re.search(r"\d+(\.\d+)?MB", bar), bar


def test_progress_false_and_small_work_are_silent(broker: Broker, big_topic: str,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    assert pylog.read_topic(big_topic, bootstrap_servers=broker.bootstrap, progress=False).num_rows == N
    small = pylog.read_topic(big_topic, bootstrap_servers=broker.bootstrap,  # automatic: too small
                             ending_offsets={big_topic: {"0": 10, "1": 10}})
    assert small.num_rows == 20
    topic = f"s-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    pylog.write_topic(pa.table({"value": [b"a", b"b"]}), topic, bootstrap_servers=broker.bootstrap)
    assert capfd.readouterr() == ("", "")
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        pylog.read_topic(big_topic, bootstrap_servers=broker.bootstrap, progress="yes")  # type: ignore[arg-type]


def test_notebook_bar_in_a_jupyter_kernel(broker: Broker, big_topic: str, tmp_path: Path) -> None:
    import ipykernel.kernelspec
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    ipykernel.kernelspec.install(kernel_name="python3", prefix=str(tmp_path / "jupyter"))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "jupyter" / "share" / "jupyter" / "kernels")])
    assert Path(specs.get_kernel_spec("python3").argv[0]).resolve() == Path(sys.executable).resolve()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        f"import pylog\nt = pylog.read_topic({big_topic!r}, bootstrap_servers={broker.bootstrap!r}, "
        "progress=True)\nprint(t.num_rows)")]
    km = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    NotebookClient(nb, km=km, timeout=300).execute()
    outputs = nb.cells[0].outputs
    assert [o["text"] for o in outputs if o.get("name") == "stdout"] == [f"{N}\n"]
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) == 1  # tqdm's notebook bar (an ipywidgets HBox), not text on stderr
    assert not [o for o in outputs if o.get("name") == "stderr"]
