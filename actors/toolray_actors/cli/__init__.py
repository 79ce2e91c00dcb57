"""The ``toolray`` command line: ``demo`` (the main job), ``bench``, ``trace`` and ``chaos``.

Every user mistake (no Ray, a bad config file, an unreachable cluster, a tool that cannot
be pickled) ends in one clear line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ("main",)


def _parser() -> argparse.ArgumentParser:
    from . import _bench, _chaos, _demo, _rollout, _scopes_cli, _trace

    parser = argparse.ArgumentParser(
        prog="toolray", description="Run LLM-agent tool calls on Ray actors."
    )
    parser.add_argument(
        "--config",
        default=None,
        help="a RuntimeConfig TOML file (default: $TOOLRAY_CONFIG, else built-in local defaults)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module, help_text in (
        ("demo", _demo, "start an embedded local Ray and show what toolray does"),
        ("bench", _bench, "parallel-group throughput and latency against raw Ray"),
        ("trace", _trace, "write a Chrome/Perfetto trace of a batch (or an event log)"),
        ("chaos", _chaos, "agents under random SIGKILLs: check that nothing is lost or re-run"),
    ):
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
        if module is _bench:  # --scopes N measures agent scopes per executors mode instead
            _scopes_cli.add_arguments(command)
            _rollout.add_arguments(command)
            command.set_defaults(run=_bench_run)
    return parser


def _bench_run(args: argparse.Namespace) -> int:
    from . import _bench, _rollout, _scopes_cli

    if args.rollout:
        return _rollout.main_rollout(args)
    if args.scopes:
        return _scopes_cli.main_scopes(args)
    return _bench.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolray`` console script and ``python -m toolray``."""
    from toolray_actors._config import ConfigError

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ConfigError as err:
        print(f"toolray: {err}", file=sys.stderr)
    except KeyboardInterrupt:
        print("toolray: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one clear line for the user's mistakes
        from ._errors import explain

        print(f"toolray: {explain(err)}", file=sys.stderr)
    return 2
