"""Presentation cards (R-PRES): what a UI renders for a call and its result.

Pure vocabulary: the registry never calls presenters itself (R-PRES-12). Every card is a
frozen dataclass with a ``card`` discriminator (and ``shape`` / ``kind`` where a card has a
second one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._content import ContentBlock

__all__ = (
    "DiffCallView",
    "DiffResultView",
    "FileDiff",
    "FileLocation",
    "GenericCallView",
    "GenericResultView",
    "ReadLine",
    "ReadResultView",
    "SearchFileMatches",
    "SearchLineMatch",
    "SearchMatchesResultView",
    "SearchPathsResultView",
    "TerminalCallView",
    "TerminalResultView",
    "ToolCallKind",
    "ToolCallView",
    "ToolResult",
    "ToolResultView",
    "WebFetchResultView",
    "WebSearchResultView",
    "WebSource",
)

ToolCallKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "fetch", "other"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileLocation:
    """A file and an optional 1-based line."""

    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDiff:
    """One file's change; ``old_text=None`` means a new file or an overwrite."""

    path: str
    old_text: str | None
    new_text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericCallView:
    """A generic call card (R-PRES-02)."""

    title: str
    kind: ToolCallKind | None = None
    raw_input: Any = None
    content: tuple[ContentBlock, ...] | None = None
    locations: tuple[FileLocation, ...] | None = None
    card: Literal["generic"] = field(default="generic", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalCallView:
    """A terminal command card (R-PRES-04); a relative ``cwd`` is resolved by the UI."""

    title: str
    description: str | None = None
    cwd: str | None = None
    card: Literal["terminal"] = field(default="terminal", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffCallView:
    """A diff card (R-PRES-05)."""

    title: str
    diffs: tuple[FileDiff, ...]
    locations: tuple[FileLocation, ...] | None = None
    card: Literal["diff"] = field(default="diff", init=False)


ToolCallView: TypeAlias = GenericCallView | TerminalCallView | DiffCallView


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericResultView:
    """A generic result card (R-PRES-07)."""

    title: str | None = None
    content: tuple[ContentBlock, ...] | None = None
    card: Literal["generic"] = field(default="generic", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalResultView:
    """A terminal result; ``exit_code`` and ``signal`` are documented as exclusive."""

    title: str | None = None
    output: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    card: Literal["terminal"] = field(default="terminal", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffResultView:
    """A diff result card."""

    diffs: tuple[FileDiff, ...]
    title: str | None = None
    card: Literal["diff"] = field(default="diff", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchLineMatch:
    """One matching line."""

    line_number: int
    line: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchFileMatches:
    """The matches in one file."""

    path: str
    matches: tuple[SearchLineMatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchMatchesResultView:
    """``card='search'``, ``shape='matches'`` (R-PRES-08)."""

    files: tuple[SearchFileMatches, ...]
    truncated: bool
    total: int
    title: str | None = None
    card: Literal["search"] = field(default="search", init=False)
    shape: Literal["matches"] = field(default="matches", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchPathsResultView:
    """``card='search'``, ``shape='paths'`` (R-PRES-08)."""

    paths: tuple[str, ...]
    truncated: bool
    total: int
    title: str | None = None
    card: Literal["search"] = field(default="search", init=False)
    shape: Literal["paths"] = field(default="paths", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadLine:
    """One numbered line of a read card."""

    number: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResultView:
    """A file read (R-PRES-09); ``offset`` is 1-based and kept even with no lines."""

    path: str
    offset: int
    lines: tuple[ReadLine, ...]
    total_lines: int
    title: str | None = None
    lang: str | None = None
    content: tuple[ContentBlock, ...] | None = None
    card: Literal["read"] = field(default="read", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSource:
    """One web search source."""

    url: str
    title: str | None = None
    snippet: str | None = None
    published_at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearchResultView:
    """``card='web'``, ``kind='search'`` (R-PRES-10)."""

    sources: tuple[WebSource, ...]
    truncated: bool
    answer: str | None = None
    title: str | None = None
    card: Literal["web"] = field(default="web", init=False)
    kind: Literal["search"] = field(default="search", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class WebFetchResultView:
    """``card='web'``, ``kind='fetch'`` (R-PRES-10)."""

    url: str
    status_code: int
    truncated: bool
    title: str | None = None
    card: Literal["web"] = field(default="web", init=False)
    kind: Literal["fetch"] = field(default="fetch", init=False)


ToolResultView: TypeAlias = (
    GenericResultView
    | TerminalResultView
    | DiffResultView
    | SearchMatchesResultView
    | SearchPathsResultView
    | ReadResultView
    | WebSearchResultView
    | WebFetchResultView
)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The input of ``present_result``: ``meta`` only for top-level calls with a projector."""

    content: tuple[ContentBlock, ...] | list[ContentBlock]
    is_error: bool
    meta: Any = None
