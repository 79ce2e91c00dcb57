"""A small stateful world for environment benchmarks and replays: three API classes.

Like the stateful API classes of multi-turn function-calling benchmarks: a file system
(``fs``), a ticket desk (``desk``) and a trading account (``account``), each an ordinary
Python class whose methods a tool calls on ``ctx.environment``. The same methods called
directly on plain instances are the reference a replay through toolray must match exactly
(values and final states). Every method is deterministic; a bad call raises ``ValueError``,
which a tool reports as its failure.
"""

from __future__ import annotations

from typing import ClassVar, TypedDict, cast

from toolray import (
    EnvironmentDefinition,
    ToolDefinition,
    ToolRunContext,
    define_environment,
    tool,
)

__all__ = ("API", "Account", "Desk", "FileSystem", "definitions", "state_of")


Config = dict[str, object]
"""An instance's config, as ``open()`` gives it (lossless JSON)."""


class Ticket(TypedDict):
    """One ticket of a desk."""

    title: str
    priority: int
    notes: list[str]
    open: bool


class FileSystem:
    """Directories of text files; a current directory."""

    def __init__(self, config: Config | None = None) -> None:
        files = cast("dict[str, str]", (config or {}).get("files", {}))
        self.files: dict[str, str] = dict(files)
        self.cwd = "/"

    def _path(self, name: str) -> str:
        return name if name.startswith("/") else self.cwd.rstrip("/") + "/" + name

    def cd(self, path: str) -> str:
        target = self._path(path)
        if not any(f.startswith(target.rstrip("/") + "/") for f in self.files):
            raise ValueError(f"no such directory: {target}")
        self.cwd = target
        return self.cwd

    def write(self, name: str, text: str) -> int:
        self.files[self._path(name)] = text
        return len(self.files)

    def append(self, name: str, text: str) -> int:
        path = self._path(name)
        self.files[path] = self.files.get(path, "") + text
        return len(self.files[path])

    def cat(self, name: str) -> str:
        path = self._path(name)
        if path not in self.files:
            raise ValueError(f"no such file: {path}")
        return self.files[path]

    def ls(self) -> list[str]:
        prefix = self.cwd.rstrip("/") + "/"
        names = {f.removeprefix(prefix).partition("/") for f in self.files if f.startswith(prefix)}
        return sorted(head for head, _, _ in names)


class Desk:
    """Tickets: open, comment, close."""

    def __init__(self, config: Config | None = None) -> None:
        self.tickets: dict[str, Ticket] = {}
        self.next_id = cast("int", (config or {}).get("first_id", 1))

    def open_ticket(self, title: str, priority: int) -> str:
        key = f"T{self.next_id}"
        self.next_id += 1
        self.tickets[key] = Ticket(title=title, priority=priority, notes=[], open=True)
        return key

    def comment(self, key: str, note: str) -> int:
        ticket = self._ticket(key)
        ticket["notes"].append(note)
        return len(ticket["notes"])

    def close_ticket(self, key: str) -> bool:
        ticket = self._ticket(key)
        if not ticket["open"]:
            raise ValueError(f"{key} is already closed")
        ticket["open"] = False
        return True

    def open_tickets(self) -> list[str]:
        return sorted(k for k, t in self.tickets.items() if t["open"])

    def _ticket(self, key: str) -> Ticket:
        if key not in self.tickets:
            raise ValueError(f"no such ticket: {key}")
        return self.tickets[key]


class Account:
    """Cash and positions; orders fill at a fixed price list."""

    PRICES: ClassVar[dict[str, int]] = {"ACME": 12, "GLOBEX": 40, "INITECH": 7}

    def __init__(self, config: Config | None = None) -> None:
        self.cash = cast("int", (config or {}).get("cash", 1000))
        self.positions: dict[str, int] = {}
        self.history: list[list[object]] = []

    def buy(self, symbol: str, shares: int) -> int:
        cost = self._price(symbol) * shares
        if cost > self.cash:
            raise ValueError(f"insufficient cash for {shares} {symbol}")
        self.cash -= cost
        self.positions[symbol] = self.positions.get(symbol, 0) + shares
        self.history.append(["buy", symbol, shares])
        return self.cash

    def sell(self, symbol: str, shares: int) -> int:
        if self.positions.get(symbol, 0) < shares:
            raise ValueError(f"not enough {symbol} to sell {shares}")
        self.positions[symbol] -= shares
        self.cash += self._price(symbol) * shares
        self.history.append(["sell", symbol, shares])
        return self.cash

    def balance(self) -> dict[str, object]:
        return {"cash": self.cash, "positions": dict(sorted(self.positions.items()))}

    def _price(self, symbol: str) -> int:
        if symbol not in self.PRICES:
            raise ValueError(f"unknown symbol: {symbol}")
        return self.PRICES[symbol]


API: dict[str, type[FileSystem | Desk | Account]] = {
    "fs": FileSystem,
    "desk": Desk,
    "account": Account,
}
"""Each environment's class, by the environment's name."""


def state_of(obj: object) -> dict[str, object]:
    """A world object's whole state, comparable across processes."""
    return dict(sorted(vars(obj).items()))


def _method(env: str, method: str) -> ToolDefinition:
    """A tool ``<env>_<method>`` calling ``method`` on its scope's instance of ``env``."""
    name = f"{env}_{method}"
    safe = method in ("cat", "ls", "open_tickets", "balance")

    @tool(name=name, environment=env, concurrency_safe=safe)
    def call(args: dict[str, object], *, ctx: ToolRunContext) -> object:
        """Call the method on the scope's instance (``args``: its keyword arguments)."""
        return getattr(ctx.environment, method)(**args)

    return call


_METHODS = {
    "fs": ("cd", "write", "append", "cat", "ls"),
    "desk": ("open_ticket", "comment", "close_ticket", "open_tickets"),
    "account": ("buy", "sell", "balance"),
}


def definitions(
    fork: str = "snapshot", park_after_s: float | None = 60.0
) -> tuple[list[EnvironmentDefinition], list[ToolDefinition]]:
    """The three environments (each instance: its class made with the open's config)."""
    envs = [
        define_environment(name, create=cls, fork=fork, park_after_s=park_after_s)  # type: ignore[arg-type]
        for name, cls in API.items()
    ]
    tools = [_method(env, m) for env, methods in _METHODS.items() for m in methods]
    return envs, tools
