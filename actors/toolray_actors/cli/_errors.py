"""One-line explanations of the errors a user can cause."""

from __future__ import annotations

__all__ = ("explain",)


def explain(err: BaseException) -> str:
    """A single line saying what went wrong and what to do."""
    text = next(iter(str(err).strip().splitlines()), type(err).__name__)
    name = type(err).__name__
    if name == "StartError":
        return f"{text} (check the address, or omit it to start a local Ray)"
    if isinstance(err, TypeError) and "cannot be pickled" in text:
        return f"{text} (define the tool at module level, without locks, sockets or files)"
    return f"{name}: {text}"
