"""Who calls: bearer tokens, each naming the scope (tenant) its client sees and may call.

:class:`BearerTokens` is an ``mcp`` ``TokenVerifier``: a token maps to one scope, and the
verified ``AccessToken`` carries it in its claims (:data:`SCOPE_CLAIM`). Any other verifier
works too (a JWT or introspection verifier): a token whose claims name no scope sees the
app's default scope. Tokens are kept only as SHA-256 digests, so a pickled verifier (sent
to Ray Serve replicas) holds no secret. A token file is refused unless only its owner can
read it (mode 0600 or stricter), and it is read again when it changes: removing a line
revokes that token within a second.

The HTTP side is the ``mcp`` SDK's: its bearer backend authenticates, and a request without
a valid token is answered ``401`` with ``WWW-Authenticate: Bearer …`` before anything else
runs.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken, TokenVerifier, principal_components
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Scope

from toolray.errors import ToolrayError

__all__ = (
    "SCOPE_CLAIM",
    "BearerTokens",
    "Caller",
    "TokenFileError",
    "caller_of",
    "require_bearer",
)

SCOPE_CLAIM: Final = "toolray_scope"
"""The ``AccessToken.claims`` key naming the scope a token's client sees (``None``: global)."""

_RELOAD_S: Final = 1.0
"""How often, at most, a token file is checked for changes."""


class TokenFileError(ToolrayError, PermissionError, ValueError):
    """A token file that cannot be used: unreadable, readable by others, or malformed."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@final
class BearerTokens:
    """A ``TokenVerifier`` where each bearer token names the scope its client may use.

    Example:
        >>> tokens = BearerTokens({"s3cr3t-token-of-team-a": "team-a"})
        >>> import asyncio
        >>> asyncio.run(tokens.verify_token("s3cr3t-token-of-team-a")).claims
        {'toolray_scope': 'team-a'}
        >>> asyncio.run(tokens.verify_token("a guess")) is None
        True
    """

    def __init__(self, tokens: Mapping[str, str | None]) -> None:
        """Tokens and the scope each one names (``None``: the global scope)."""
        self._scopes = _digests(tokens)
        self._path: Path | None = None
        self._seen: tuple[float, int] | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BearerTokens:
        """Tokens from a file of ``token scope`` lines (``#`` comments and blank lines skipped).

        The file must be readable by its owner only (``chmod 600``); it is read again when
        it changes, so a removed line revokes its token.

        Raises:
            TokenFileError: the file is missing, readable by other users, or malformed (the
                message names the line, never a token).
        """
        tokens = cls({})
        tokens._path = Path(path)
        tokens._reload(force=True)
        return tokens

    @property
    def scopes(self) -> frozenset[str | None]:
        """The scopes the tokens name (the tenants)."""
        self._reload()
        return frozenset(self._scopes.values())

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access (its scope in :data:`SCOPE_CLAIM`), or ``None`` if unknown."""
        self._reload()
        digest = _digest(token)
        if digest not in self._scopes:
            return None
        return AccessToken(
            token=token,
            client_id=f"toolray-token-{digest[:16]}",
            scopes=[],
            claims={SCOPE_CLAIM: self._scopes[digest]},
        )

    def _reload(self, *, force: bool = False) -> None:
        path = self._path
        if path is None or (not force and time.monotonic() - self._checked < _RELOAD_S):
            return
        with self._lock:
            self._checked = time.monotonic()
            try:
                info = path.stat()
            except OSError as err:
                if force:
                    raise TokenFileError(f"token file {path}: {err.strerror}") from None
                return  # gone (or on another node): keep the tokens already read
            if not force and self._seen == (info.st_mtime, info.st_size):
                return
            self._scopes = _digests(_read_tokens(path, info))
            self._seen = (info.st_mtime, info.st_size)

    def __getstate__(self) -> dict[str, Any]:
        return {"scopes": self._scopes, "path": self._path, "seen": self._seen}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._scopes = state["scopes"]
        self._path = state["path"]
        self._seen = state["seen"]
        self._checked = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f" from {self._path}" if self._path is not None else ""
        return f"<BearerTokens {len(self._scopes)} tokens{where}>"


def _digests(tokens: Mapping[str, str | None]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for token, scope in tokens.items():
        if not isinstance(token, str) or not token or token != token.strip():
            raise ValueError("a bearer token is a non-empty str without surrounding spaces")
        if scope is not None and (not isinstance(scope, str) or not scope):
            raise ValueError("a token's scope is a non-empty str (or None for the global scope)")
        found[_digest(token)] = scope
    return found


def _read_tokens(path: Path, info: os.stat_result) -> dict[str, str | None]:
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        mode = oct(stat.S_IMODE(info.st_mode))
        raise TokenFileError(
            f"token file {path} has mode {mode}: other users may read it; chmod 600 {path}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TokenFileError(f"token file {path} cannot be read: {err}") from None
    tokens: dict[str, str | None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 2:
            raise TokenFileError(f"token file {path}, line {number}: expected `token scope`")
        if fields[0] in tokens:
            raise TokenFileError(f"token file {path}, line {number}: a token listed twice")
        tokens[fields[0]] = fields[1]
    return tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """Who a request comes from: its principal (sessions are bound to it) and its scope."""

    principal: str
    scope: str | None


ANONYMOUS: Final = "anonymous"
"""The principal of every request when an app serves without authentication."""


def caller_of(asgi_scope: Scope, default: str | None) -> Caller:
    """The authenticated caller of a request (anonymous, seeing ``default``, without auth)."""
    user = asgi_scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return Caller(principal=ANONYMOUS, scope=default)
    token = user.access_token
    claims = token.claims or {}
    scope = claims.get(SCOPE_CLAIM, default)
    scope = None if scope is None else str(scope)
    client_id, issuer, subject = principal_components(token)
    return Caller(principal=f"{client_id}|{issuer or ''}|{subject or ''}", scope=scope)


def require_bearer(app: ASGIApp, verifier: TokenVerifier) -> ASGIApp:
    """``app`` behind the SDK's bearer authentication: no valid token, ``401``."""
    required = RequireAuthMiddleware(AuthContextMiddleware(app), required_scopes=[])
    return AuthenticationMiddleware(required, backend=BearerAuthBackend(verifier))
