"""``toolray serve``: a namespace's tools over MCP streamable HTTP, to tenants with tokens.

An embedded local Ray by default (the config's ``address`` attaches to a cluster instead,
where the namespace's tools registered by other drivers are served too); ``--tools
MODULE[:FUNC]`` imports MODULE and calls ``FUNC(registry)`` (default ``register``) once; the
app runs as a Ray Serve application (``deploy_mcp``) at ``http://<host>:<port>/mcp``. Every
client needs a token from ``--tokens`` (``token scope`` lines, mode 0600): it sees and calls
that scope's tools only. ``--insecure-no-auth`` serves without tokens, on a loopback host
only. Ctrl-C stops it: the Serve application, its sessions, and the Ray it started.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
from typing import Literal

from toolray_actors._config import load_config

__all__ = ("add_arguments", "run")

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _replicas(text: str) -> int | Literal["auto"]:
    if text == "auto":
        return "auto"
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(
            f'a number of replicas (at least 1) or "auto", not {text!r}'
        )
    return count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolray serve``."""
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="the port to listen on")
    parser.add_argument(
        "--tokens", metavar="FILE", help="`token scope` lines, readable by you only (chmod 600)"
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE[:FUNC]",
        help="import MODULE and call FUNC(registry) once (default FUNC: register); repeatable",
    )
    parser.add_argument(
        "--scope-per-session",
        action="store_true",
        help="each MCP session calls in a child scope of its own (its own environments)",
    )
    parser.add_argument(
        "--replicas",
        type=_replicas,
        default=1,
        metavar="N|auto",
        help="Serve replicas, each a driver of the namespace (auto: Serve's autoscaling)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        dest="allowed_hosts",
        metavar="HOST[:PORT|:*]",
        help="a Host header to accept besides this machine's (DNS-rebinding check); repeatable",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without tokens (only with a loopback --host)",
    )


def _auth(args: argparse.Namespace) -> object | None:
    from toolray.adapters.mcp import BearerTokens

    if args.insecure_no_auth:
        if args.tokens:
            raise ValueError("--tokens and --insecure-no-auth exclude each other")
        if args.host not in _LOOPBACK:
            raise ValueError(
                "--insecure-no-auth serves only this machine: use a loopback --host, "
                f"not {args.host}"
            )
        return None
    if not args.tokens:
        raise ValueError("--tokens FILE is required (or --insecure-no-auth on a loopback host)")
    return BearerTokens.from_file(args.tokens)


def _allowed_hosts(args: argparse.Namespace) -> list[str] | None:
    extra = list(args.allowed_hosts or [])
    if args.host in _LOOPBACK and not extra:
        return None  # this machine's names, the default
    loopback = ["127.0.0.1", "localhost", "[::1]"]
    names = [] if args.host in ("0.0.0.0", "::") else [args.host]
    return [host for name in [*loopback, *names] for host in (name, f"{name}:*")] + extra


def _register(spec: str, registry: object) -> int:
    module_name, _, func_name = spec.partition(":")
    if os.getcwd() not in sys.path:  # as `python -m` would: modules of the working directory
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    register = getattr(module, func_name or "register", None)
    if not callable(register):
        raise ValueError(f"--tools {spec}: {module_name} has no function {func_name or 'register'}")
    register(registry)
    return 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; 0 once everything it started has stopped."""
    from toolray_actors.driver._runtime import RayRuntime
    from toolray_actors.serve import deploy_mcp

    auth = _auth(args)  # a usage or token-file error ends here, before Ray starts
    hosts = _allowed_hosts(args)
    # Ctrl-C stops it even when started in the background (which inherits SIGINT ignored),
    # and so does SIGTERM (a service manager's stop).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    cfg = load_config(args.config or os.environ.get("TOOLRAY_CONFIG") or "local")
    rt = RayRuntime.start(cfg, address=cfg.address or "local")
    deployment = None
    try:
        for spec in args.tools:
            _register(spec, rt.registry)
        deployment = deploy_mcp(
            rt,
            auth=auth,
            scope_per_session=args.scope_per_session,
            allowed_hosts=hosts,
            replicas=args.replicas,
            host=args.host,
            port=args.port,
        )
        tools = len(rt.registry.schemas())
        tenants = len(getattr(auth, "scopes", ())) if auth is not None else 0
        who = f"{tenants} tenants" if auth is not None else "this machine, without tokens"
        print(f"toolray serve: {tools} global tools for {who} at {deployment.url}", flush=True)
        print("toolray serve: Ctrl-C stops", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("toolray serve: stopping", flush=True)
    finally:
        if deployment is not None:
            deployment.shutdown()
        rt.shutdown()
    print("toolray serve: stopped", flush=True)
    return 0
