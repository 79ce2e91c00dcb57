"""Low-level building blocks for runtimes such as ``toolray_actors`` (not for applications).

These names let another process run the same pipeline as :class:`toolray.ToolRegistry`
with a different body runner; their signatures may change between minor versions.
"""

from __future__ import annotations

from ._dispatch import run_body_inline as run_body_inline
from ._json import is_json as is_json
from ._json import thaw_json as thaw_json
from ._layers import Entry as Entry
from ._normalize import failure_from as failure_from
from ._pipeline import run_pipeline as run_pipeline

__all__ = (
    "Entry",
    "failure_from",
    "is_json",
    "run_body_inline",
    "run_pipeline",
    "thaw_json",
)
