"""A worker's template and the tools' code it holds (``isolation="call"``).

Every definition a worker receives (a cloudpickle blob under its key) is loaded into its
template once (``toolray.procs`` ``Template.load``), so every call process forked after
holds it — and the modules it imported. A template that restarted has lost its loads: they
are sent again before its next fork. The blobs stay here too (least recently used go
first), for call processes forked before their tool arrived.

The template keeps its latest 256 loads (``toolray.isolation``'s preload): what it holds is
mirrored here in the order it loaded them, so a definition it let go is loaded again
before a fork is said to hold it — an instance's process is sent no definition it is
said to hold, and has no other way to get one.

With ``isolation="sandbox"`` (a :class:`SandboxSpec`) the template is the sandbox's
(``toolray.isolation.sandbox_template``: nothing of the worker's environment) and each
child gets a scratch directory of its own, removed once it ended.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from toolray.isolation import call_template, sandbox_template
from toolray.procs import Template

__all__ = ("SandboxSpec", "TemplateCode")


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxSpec:
    """``isolation="sandbox"``: what each sandbox is told, and whether a missing layer refuses."""

    config: Mapping[str, object]
    """``toolray.isolation.sandbox_config(...)``: its layers and paths."""
    strict: bool = False
    """Refuse every call where a layer is missing (``confinement="strict"``)."""


_MAX_BLOBS = 256
"""Blobs kept here, and loads the template keeps (``_MAX_PRELOADED`` of its preload)."""


class TemplateCode:
    """The template of one worker, started on first use, and the code it holds."""

    def __init__(
        self, env: Mapping[str, str] | None = None, sandbox: SandboxSpec | None = None
    ) -> None:
        self._env = dict(env or {})
        self.sandbox = sandbox
        self._template: Template | None = None
        self._pid: int | None = None
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._loaded: OrderedDict[str, None] = OrderedDict()
        """What the template holds, in the order it loaded it (it lets the oldest go)."""

    def template(self) -> Template:
        """The running template, holding every known definition."""
        if self._template is None:
            sandbox = self.sandbox is not None
            self._template = sandbox_template() if sandbox else call_template(self._env)
        template = self._template
        template.start()
        if template.pid != self._pid:  # new, or restarted: it has lost its loads
            self._pid = template.pid
            self._loaded = OrderedDict()
            for key, blob in self._blobs.items():
                self._load(key, blob)
        return template

    def _load(self, key: str, blob: bytes) -> None:
        assert self._template is not None
        try:
            self._template.load(key, blob)
        except OSError:  # it died: the next fork restarts it and loads everything again
            return
        self._loaded[key] = None
        self._loaded.move_to_end(key)
        if len(self._loaded) > _MAX_BLOBS:  # the template let its oldest load go too
            self._loaded.popitem(last=False)

    def learn(self, key: str, blob: bytes) -> None:
        """A definition arrived: keep its blob; the template loads it (once)."""
        self._blobs[key] = blob
        self._blobs.move_to_end(key)
        if len(self._blobs) > _MAX_BLOBS:  # the template may still hold it: _loaded says
            self._blobs.popitem(last=False)
        if key not in self._loaded and self._template is not None:
            self._load(key, blob)

    def blob(self, key: str) -> bytes | None:
        """The blob of ``key`` (``None`` if it never came, or went out of the cache)."""
        blob = self._blobs.get(key)
        if blob is not None:
            self._blobs.move_to_end(key)
        return blob

    def loaded(self) -> set[str]:
        """The keys the template holds now (a process forked now holds them too)."""
        return set(self._loaded)

    def fork_args(self, memory_mb: int) -> tuple[dict[str, object], str | None]:
        """A child's arguments, and its scratch directory (a sandbox's; ``None``: none)."""
        if self.sandbox is None:
            return {"memory_mb": memory_mb}, None
        workdir = tempfile.mkdtemp(prefix="toolray-sandbox-")
        args = {"memory_mb": memory_mb, "sandbox": dict(self.sandbox.config), "workdir": workdir}
        return args, workdir

    @staticmethod
    def forget(workdir: str | None) -> None:
        """Remove an ended sandbox's scratch directory (its files were in its own tmpfs)."""
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

    def orphans(self) -> int:
        """Processes its template adopted (left behind by a killed call process) and killed."""
        return 0 if self._template is None else self._template.statistics().orphans

    def stop(self) -> None:
        """Stop the template, its processes killed and reaped first (blocks briefly)."""
        if self._template is not None:
            self._template.stop()
