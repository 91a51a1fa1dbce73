"""Every notebook in notebooks/ runs top to bottom (nbclient, a real ipykernel) from a
temporary folder, and is committed with its outputs stripped."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient
from train_runs import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_the_four_notebooks():
    names = [p.stem for p in NOTEBOOKS]
    assert len(names) >= 4, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_runs(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "strip the outputs"
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the kernel inherits the environment
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    client = NotebookClient(
        nbformat.read(copy, as_version=4),
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    figures = sum(
        "image/png" in out.get("data", {})
        for cell in client.nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert figures >= 2, f"{path.name} drew {figures} figures"
