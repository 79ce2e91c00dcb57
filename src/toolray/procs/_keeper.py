"""The keeper: a shell between the host and its template (``TemplateSpec(keeper=True)``).

A Ray actor whose owner dies is ended at once — no shutdown hook runs — and Ray SIGKILLs its
direct children. With a keeper, that child is the shell, not the template: the template
lives on, sees the host's socket close, and ends every child and what they started before
it exits. The shell starts the template (its output to nowhere, as without a keeper), says
its pid on its own output, lets go of that output, then waits and ends as the template did
(a signal ``n`` as status ``128 + n``). It holds the template's end of the control socket
too (a POSIX shell closes only descriptors 0-9 by number), and lets go of it as it exits,
right after the template. Standard library only.
"""

from __future__ import annotations

import subprocess
from typing import Final

__all__ = ("keeper_argv", "kept_code", "kept_pid")

_SCRIPT: Final = '"$@" >/dev/null & echo $!; exec >&- 2>/dev/null; wait $!'
_SHELL: Final = "/bin/sh"
_NAME: Final = "toolray-keeper"
"""The shell's ``$0``: what a process listing shows the keeper as."""


def keeper_argv(argv: list[str]) -> list[str]:
    """The command that runs ``argv`` (the template) under a keeper."""
    return [_SHELL, "-c", _SCRIPT, _NAME, *argv]


def kept_pid(popen: subprocess.Popen[bytes]) -> int:
    """The template's pid, as its keeper says it (the keeper's own if it says nothing)."""
    assert popen.stdout is not None
    with popen.stdout:
        said = popen.stdout.readline().strip()
    return int(said) if said.isdigit() else popen.pid


def kept_code(code: int) -> int:
    """The template's end in ``subprocess``'s terms, from its keeper's exit status."""
    return 128 - code if code > 128 else code
