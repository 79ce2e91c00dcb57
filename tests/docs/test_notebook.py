"""``examples/notebook.ipynb`` runs top to bottom in a real Jupyter kernel (ipykernel).

The kernel is a fresh process: the notebook starts its own local Ray (``address="local"``),
with the small CI configuration (``$TOOLRAY_CONFIG``), and shuts it down in its last cell.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs._snippets import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]

NOTEBOOK = ROOT / "examples" / "notebook.ipynb"


def _text(cell: dict[str, object]) -> str:
    parts = []
    for output in cell.get("outputs", []):  # type: ignore[union-attr]
        parts.append(output.get("text") or output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.mark.timeout(400)
def test_the_notebook_runs_in_a_real_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("TOOLRAY_CONFIG", "ci")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    code = [c for c in notebook.cells if c.cell_type == "code"]
    texts = [_text(c) for c in code]
    assert "<RayRuntime namespace='toolray-ci' open>" in texts[0]
    assert "['note', 'word_count']" in texts[1]
    assert "c1 3\nc2 2\nc3 noted 13 characters\nc4 Error: invalid arguments" in texts[2]
    assert "[3, 2]" in texts[3]  # the awaited API, top-level await in the kernel
    assert "['executor', 'pool', 'registry', 'worker']" in texts[4]
    assert "c1 word_count parallel" in texts[5]
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
