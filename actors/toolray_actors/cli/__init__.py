"""The ``toolray`` command line: ``demo`` (the main job), ``bench``, ``trace``, ``top``, ``chaos``.

Every user mistake (a bad option, a missing or invalid config file, Ray not installed, an
unreachable cluster, a tool that cannot be pickled) ends in one clear line on stderr,
``toolray: <message>``, and exit code 2, never a traceback or an exception's class name; a
bare ``toolray`` prints its usage on stderr and exits 2. Nothing here imports Ray until a
command that needs it runs; Ray's own notices that toolray's commands cause (a worker they
kill on purpose, the token-authentication notice of the local Ray they start) go to the
``toolray`` logger at debug level for the command's duration.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ("COMMANDS", "Command", "main", "parser")

CONFIG_HELP = (
    'a shipped config ("local", "cluster", "ci") or a RuntimeConfig TOML file; accepted '
    "before or after the command (default: $TOOLRAY_CONFIG, else the shipped local config)"
)

USAGE_EXIT = (
    "2  a usage or setup error, said in one line on stderr: a bad option, a --config\n"
    "     file that does not exist or does not validate, Ray not installed, an\n"
    "     unreachable cluster"
)


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its module, one-line help, exit codes and whether it needs Ray."""

    name: str
    module: str
    help: str
    exits: tuple[str, ...]
    needs_ray: Callable[[argparse.Namespace], bool]


def _always(args: argparse.Namespace) -> bool:
    return True


def _trace_needs_ray(args: argparse.Namespace) -> bool:
    return not (args.in_process or args.from_log)


COMMANDS: tuple[Command, ...] = (
    Command(
        "demo",
        "_demo",
        "start an embedded local Ray and show what toolray does, batch by batch",
        ("0  the demo ran to the end",),
        _always,
    ),
    Command(
        "bench",
        "_bench",
        "parallel-group throughput and latency against raw Ray (--scopes: agent scopes "
        "per executors mode; --rollout: a rollout plan with faulty calls beside the peer "
        "patterns)",
        ("0  the figures were measured and printed",),
        _always,
    ),
    Command(
        "trace",
        "_trace",
        "write a Chrome/Perfetto trace of a batch (on Ray, --in-process without Ray, or "
        "--from-log an event log)",
        ("0  the trace was written",),
        _trace_needs_ray,
    ),
    Command(
        "top",
        "_top",
        "a live view of a namespace on a running cluster: scopes, tools, pools, actors "
        "(--once --json for scripts)",
        ("0  the picture was printed (--once), or the live view was left with Ctrl-C",),
        _always,
    ),
    Command(
        "serve",
        "_serve",
        "serve a namespace's tools over MCP streamable HTTP to clients with tokens "
        "(Ray Serve; an embedded local Ray by default)",
        ("0  stopped with Ctrl-C, everything it started ended",),
        _always,
    ),
    Command(
        "chaos",
        "_chaos",
        "agents under random SIGKILLs: check that no call is lost or run twice",
        ("0  every invariant held", "1  an invariant failed (the table says which)"),
        _always,
    ),
)


def _epilog(exits: Sequence[str]) -> str:
    lines = [*exits, USAGE_EXIT, "130  interrupted (Ctrl-C)"]
    return "exit codes:\n" + "\n".join(f"  {line}" for line in lines)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolray`` (no Ray imported)."""
    import importlib

    from toolray import __version__

    from . import _env_cli, _rollout, _scopes_cli
    from ._errors import Parser

    top = Parser(
        prog="toolray",
        description="Run LLM-agent tool calls on Ray actors: validated, policed, scheduled, "
        "one result per call.",
        epilog=_epilog(("0  success", "1  the command ran and found a failure (chaos)")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"toolray {__version__}")
    top.add_argument("--config", default=None, metavar="NAME|PATH", help=CONFIG_HELP)
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    for spec in COMMANDS:
        module = importlib.import_module(f".{spec.module}", __name__)
        command = sub.add_parser(
            spec.name,
            help=spec.help,
            description=spec.help,
            epilog=_epilog(spec.exits),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_argument(
            "--config", default=argparse.SUPPRESS, metavar="NAME|PATH", help=CONFIG_HELP
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run, spec=spec, parser=command)
        if spec.name == "bench":  # --scopes N measures agent scopes per executors mode instead
            _scopes_cli.add_arguments(command)
            _rollout.add_arguments(command)
            _env_cli.add_arguments(command)
            command.set_defaults(run=_bench_run)
    return top


def _bench_run(args: argparse.Namespace) -> int:
    from . import _bench, _env_cli, _rollout, _scopes_cli
    from ._bench_report import check_outputs
    from ._errors import CommandError

    check_outputs(args.json, args.png)  # before anything is measured
    if args.png is not None and (args.rollout or args.scopes or args.environments):
        raise CommandError(
            "--png draws the group-shape benchmark; --scopes, --rollout and --environments "
            "write --json only"
        )
    if args.environments:
        return _env_cli.main_environments(args)
    if args.rollout:
        return _rollout.main_rollout(args)
    if args.scopes:
        return _scopes_cli.main_scopes(args)
    return _bench.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolray`` console script and ``python -m toolray``."""
    from toolray_actors import ConfigError, load_config, require_ray

    from ._errors import fail

    top = parser()
    args, extra = top.parse_known_args(argv)
    if extra:  # said by the command's own parser, which names the command
        (args.parser if args.command else top).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        sys.stderr.write(top.format_usage())
        names = ", ".join(c.name for c in COMMANDS)
        return fail(f"choose a command: {names} (toolray --help says what each does)")
    try:
        if args.config is not None:
            load_config(args.config)  # a missing or invalid file fails here, in one line
        if args.spec.needs_ray(args):
            require_ray()
        from toolray_actors.driver._quiet import quiet_notices

        with quiet_notices():
            return int(args.run(args) or 0)
    except (ConfigError, ImportError) as err:
        return fail(str(err))
    except KeyboardInterrupt:
        print("toolray: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one clear line for the user's mistakes
        from ._errors import explain

        return fail(explain(err))
