"""``toolray bench`` (being implemented)."""

from __future__ import annotations

import argparse

__all__ = ("add_arguments", "run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray bench``."""


def run(args: argparse.Namespace) -> int:
    """Run ``toolray bench``."""
    raise NotImplementedError("toolray bench is being implemented")
