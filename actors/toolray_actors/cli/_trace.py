"""``toolray trace`` (being implemented)."""

from __future__ import annotations

import argparse

__all__ = ("add_arguments", "run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray trace``."""


def run(args: argparse.Namespace) -> int:
    """Run ``toolray trace``."""
    raise NotImplementedError("toolray trace is being implemented")
