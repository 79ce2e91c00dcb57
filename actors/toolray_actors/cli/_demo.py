"""``toolray demo`` (being implemented)."""

from __future__ import annotations

import argparse

__all__ = ("add_arguments", "run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray demo``."""


def run(args: argparse.Namespace) -> int:
    """Run ``toolray demo``."""
    raise NotImplementedError("toolray demo is being implemented")
