"""The farm page's "Same code, in-process or on Ray": one program, both backends, same output.

The snippet runs in this process, against the session's Ray (``RayRuntime.start()`` with
no address attaches to the Ray this process already runs, in the config's default
namespace, and ``shutdown()`` ends that namespace again).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.docs._snippets import section

pytestmark = pytest.mark.ray

PAGE = Path(__file__).resolve().parents[2] / "docs" / "farm-runtime.md"
EXPECTED = "['6', 'sunny in Lyon', 'Error: no shell here']"


def test_the_doc_has_its_sections_and_one_program() -> None:
    same = section(PAGE, "## Same code, in-process or on Ray")
    assert f"Both lines print `{EXPECTED}`" in same
    assert "### Which API runs where" in same


@pytest.mark.timeout(240)
def test_the_program_prints_the_same_in_process_and_on_ray(ray_runtime: Any) -> None:
    same = section(PAGE, "## Same code, in-process or on Ray")
    (block,) = re.findall(r"```python\n(.*?)```", same, re.DOTALL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, PAGE.name, "exec"), {"__name__": "__parity_docs__"})
    printed = [line for line in out.getvalue().splitlines() if line.startswith("[")]
    assert printed == [EXPECTED, EXPECTED]  # (Ray's own "(raylet) …" lines are not ours)
