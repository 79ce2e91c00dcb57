"""``toolray top``: a live view of a namespace on a running cluster.

It attaches to the Ray this process runs, else the cluster of the config's ``address``, of
``RAY_ADDRESS`` or of the last ``ray start`` on this machine — never a fresh local one, as
there would be nothing to watch — and asks every actor of the config's namespace for its
numbers: scopes, per-tool calls/s, in flight, p50 / p99 and failures by code, pools and
their kills, and each actor's RSS. It takes no lease and changes nothing.

``--once`` prints one picture and exits; ``--json`` prints the picture as one JSON object
(with keys ``namespace``, ``scopes``, ``tools``, ``pools``, ``actors``) — with ``--once``
exactly one, else one per line every ``--interval`` seconds. Ctrl-C ends the live view.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolray_actors._config import RuntimeConfig

__all__ = ("add_arguments", "run", "take")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"the interval must be positive, not {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray top``."""
    parser.add_argument("--once", action="store_true", help="print one picture and exit")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON objects (keys: namespace, scopes, tools, pools, actors) instead "
        "of tables; with --once exactly one",
    )
    parser.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        metavar="S",
        help="seconds between pictures (default: 1)",
    )


def _attach(cfg: RuntimeConfig) -> None:
    """Connect to a running cluster (never start one: there would be nothing to watch)."""
    from toolray_actors.driver._ray_init import NoClusterError, StartError, connect_ray

    from ._errors import CommandError

    address = cfg.address if cfg.address not in (None, "local") else "auto"
    try:
        connect_ray(cfg.model_copy(update={"address": address}))
    except NoClusterError:
        raise CommandError(
            "top watches a running Ray cluster and found none on this machine: start "
            "one (`ray start --head`) and run your drivers on it, or name its address with "
            "RAY_ADDRESS or the config's `address`"
        ) from None
    except StartError as err:
        raise CommandError(f"top watches a running Ray cluster: {err}") from None


def take(namespace: str) -> dict[str, Any]:
    """One picture of ``namespace`` (Ray is connected)."""
    from toolray_actors.driver._stats_collect import gather

    from ._top_view import snapshot

    return snapshot(asyncio.run(gather(namespace)))


def run(args: argparse.Namespace) -> int:
    """Run ``toolray top`` (Ray and rich are imported here, not when the CLI parses)."""
    from toolray_actors._config import load_config

    cfg = load_config(args.config)
    _attach(cfg)
    with contextlib.suppress(KeyboardInterrupt):  # the way to leave the live view
        _watch(cfg.namespace, args)
    return 0


def _watch(namespace: str, args: argparse.Namespace) -> None:
    if args.json:
        while True:
            print(json.dumps(take(namespace), sort_keys=True), flush=True)
            if args.once:
                return
            time.sleep(args.interval)
    from rich.console import Console
    from rich.live import Live

    from ._top_view import render

    console = Console()
    if args.once:
        console.print(render(take(namespace)))
        return
    with Live(render(take(namespace)), console=console, auto_refresh=False) as live:
        while True:
            time.sleep(args.interval)
            live.update(render(take(namespace)), refresh=True)
