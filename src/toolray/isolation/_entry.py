"""The entry of every child a worker's template forks: a call process or an instance's."""

from __future__ import annotations

from toolray.procs import ChildContext

from ._child import serve_call
from ._instance import serve_instance

__all__ = ("serve",)


def serve(ctx: ChildContext) -> int:
    """An instance's process when the fork asked for one (``"instance"``), else a call's."""
    if ctx.args.get("instance"):
        return serve_instance(ctx)
    return serve_call(ctx)
