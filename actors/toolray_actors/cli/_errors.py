"""One error style for every command: ``toolray: <message>`` on stderr, exit code 2.

A message says what went wrong and what to do, in one line, without an exception's class
name: the user's mistakes (a bad option, a config, Ray not installed, an unreachable
cluster) are not bugs to debug.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

__all__ = ("CommandError", "Parser", "explain", "fail")


class CommandError(Exception):
    """A failure a command explains in full: its message is printed as it is."""


def explain(err: BaseException) -> str:
    """A single line saying what went wrong and what to do."""
    text = next(iter(str(err).strip().splitlines()), "") or f"{type(err).__name__} (no message)"
    if type(err).__name__ == "StartError":
        return f"{text} (check the address, or omit it to start a local Ray)"
    if isinstance(err, TypeError) and "cannot be pickled" in text:
        return f"{text} (define the tool at module level, without locks, sockets or files)"
    return text


def fail(message: str) -> int:
    """Print ``toolray: <message>`` on stderr; the usage-error exit code."""
    print(f"toolray: {message}", file=sys.stderr)
    return 2


_ARGUMENT = re.compile(r"^argument ([^:]+): ")


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line, not a usage screen.

    ``toolray bench --scopes banana`` prints ``toolray: bench --scopes: expected N or
    N,M,…: 'banana' (toolray bench --help lists the options)`` and exits 2; ``--help``
    still prints the command's own usage and options.
    """

    def error(self, message: str) -> NoReturn:
        """Print the mistake in one line and exit 2."""
        command = self.prog.removeprefix("toolray").strip()
        where = _ARGUMENT.match(message)
        name = where.group(1) if where is not None else ""
        message = message[where.end() :] if where is not None else message
        if name == "COMMAND":  # "invalid choice: 'x' (choose from 'demo', …)"
            chosen, _, choices = message.removeprefix("invalid choice: ").partition(" (")
            message = f"unknown command {chosen} (" + choices.replace("'", "")
            name = ""
        subject = " ".join(part for part in (command, name) if part)
        text = f"{subject}: {message}" if subject else message
        hint = " ".join(part for part in ("toolray", command, "--help") if part)
        self.exit(2, f"toolray: {text} ({hint} lists the options)\n")
