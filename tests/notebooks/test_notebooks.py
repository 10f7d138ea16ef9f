"""The example notebooks, executed top to bottom with nbclient in a python3 kernel running this
interpreter. Each notebook starts and stops its own broker and asserts on what it shows."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["01-quickstart.ipynb", "02-spark-pipeline.ipynb", "03-consumer-lag.ipynb", "04-elastic-cluster.ipynb",
         "05-topics-as-tables.ipynb"]


@pytest.fixture(scope="session")
def kernel_specs(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A KernelSpecManager whose ``python3`` is ipykernel on this interpreter (installed into a
    temporary prefix, so whatever python3 kernel the machine has does not matter)."""
    try:
        import ipykernel.kernelspec
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError as exc:
        pytest.fail(f"the notebook tests need ipykernel and jupyter_client for {sys.executable} "
                    f"(pip install ipykernel nbclient, in the test extra): {exc}")
    prefix = tmp_path_factory.mktemp("jupyter")
    ipykernel.kernelspec.install(kernel_name="python3", prefix=str(prefix))
    specs = KernelSpecManager(kernel_dirs=[str(prefix / "share" / "jupyter" / "kernels")])
    spec = specs.get_kernel_spec("python3")
    if Path(spec.argv[0]).resolve() != Path(sys.executable).resolve():
        pytest.fail(f"the python3 kernel runs {spec.argv[0]}, not this interpreter {sys.executable}")
    return specs


def test_all_notebooks_are_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name: str, kernel_specs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    km = KernelManager(kernel_name="python3", kernel_spec_manager=kernel_specs)
    client = NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        nbformat.write(nb, tmp_path / name)
        pytest.fail(f"{name} failed (executed copy: {tmp_path / name}):\n{exc}")
    finally:  # a kernel given to nbclient is not shut down by it: whatever it started dies with it
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    widgets = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    for output in widgets:  # every widget also carries its static rendering
        assert "text/html" in output["data"]
