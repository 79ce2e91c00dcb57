"""The substrate's values: what a template is made of, how a child ended, what went wrong."""

from __future__ import annotations

import contextlib
import signal as signals
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolray.errors import ToolrayError

__all__ = ("ExitStatus", "TemplateError", "TemplateSpec", "TemplateStatistics")


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateSpec:
    """How to start a template process.

    Example:
        >>> spec = TemplateSpec(entry="mypkg.worker:serve", preload=("json", "mypkg.tools"))
        >>> spec.isolated
        False
    """

    entry: str
    """The child's entry callable: ``"pkg.module:function"`` or ``"/abs/file.py:function"``.
    It is called in each child with a :class:`toolray.procs.ChildContext`; its return value
    (an ``int``) is the exit code."""
    preload: tuple[str, ...] = ()
    """Modules (``"json"``) or files (``"/abs/file.py"``) imported before the first fork."""
    init: str | None = None
    """A callable (same notation as ``entry``) run once in the template after the preload,
    with ``init_args``; what it loads or computes, every child inherits."""
    init_args: Any = None
    """A JSON value handed to ``init``."""
    loader: str | None = None
    """A callable (same notation as ``entry``) run in the template, between forks, each time
    the host calls :meth:`Template.load` — ``loader(args, data)``; what it loads, every child
    forked afterwards inherits (a failure is printed to the template's stderr, never fatal)."""
    python: str = sys.executable
    """The interpreter of the template (and so of every child)."""
    isolated: bool = False
    """Start it with ``-I -S -B`` (no site, no user paths, no environment-driven paths)."""
    env: Mapping[str, str] | None = None
    """The template's whole environment (children inherit it); ``None``: the host's."""
    cwd: str | None = None
    """The template's working directory (``None``: the host's)."""
    sys_path: tuple[str, ...] = ()
    """Entries put in front of the template's ``sys.path`` before the preload."""
    title_room: int = 0
    """Bytes reserved in the environment area so children can :meth:`set_title` into it."""
    keeper: bool = False
    """Start it under a keeper (``/bin/sh``, which waits for it and passes on how it ended):
    the template is then not this process's direct child, so a kill of this process's
    children — Ray's, when an actor's owner dies, takes its direct children with SIGKILL —
    leaves the template alive to see its control socket close and end everything below
    it, the orphans its children left included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExitStatus:
    """How a child (or a template) ended, as its parent saw it when it reaped it."""

    code: int | None = None
    """The exit code, when it exited."""
    signal: int | None = None
    """The signal that ended it (``SIGSEGV`` for a crash, ``SIGKILL`` for a kill or an OOM)."""
    cpu_s: float = 0.0
    """User plus system CPU seconds it used."""
    max_rss_kb: int = 0
    """Its peak resident set size."""
    lost: bool = False
    """Its template died first: the child was killed with it and never reported."""

    @property
    def returncode(self) -> int:
        """``subprocess``'s convention: the exit code, or minus the signal number."""
        if self.signal is not None:
            return -self.signal
        return 0 if self.code is None else self.code

    def describe(self) -> str:
        """``"code 3"``, ``"signal SIGSEGV"`` (or ``"signal 99"``).

        Example:
            >>> ExitStatus(signal=11).describe(), ExitStatus(code=3).describe()
            ('signal SIGSEGV', 'code 3')
        """
        if self.signal is not None:
            with contextlib.suppress(ValueError):
                return f"signal {signals.Signals(self.signal).name}"
            return f"signal {self.signal}"
        return f"code {self.returncode}"

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        """A status from ``subprocess``'s convention (a negative number is a signal)."""
        return cls(signal=-returncode) if returncode < 0 else cls(code=returncode)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateStatistics:
    """A snapshot of a template's counters."""

    running: bool
    starts: int
    """Template processes started (more than one: it died, or was stopped, and restarted)."""
    forks: int
    exits: int
    """Children reported ended (lost ones included)."""
    alive: int
    """Children forked and not yet ended."""
    orphans: int = 0
    """Processes the template adopted (a child's descendant whose parent died) and killed."""


class TemplateError(ToolrayError):
    """The template could not be started, died, or refused a fork.

    ``status`` is how the template process ended, when it did.
    """

    def __init__(self, message: str, status: ExitStatus | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.status))
