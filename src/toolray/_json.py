"""Lossless JSON values: the snapshot rule and the frozen containers.

"Lossless JSON" (P-ARGS-3) in Python means: ``None``, ``bool``, ``int`` (any
size), finite ``float`` other than ``-0.0``, ``str``, exactly ``list``, exactly ``dict`` with
``str`` keys, and our frozen containers. Everything else (tuples, sets, bytes, ``Decimal``,
subclasses, NaN, infinities, ``-0.0``, non-``str`` keys, cycles) is rejected with the path of
the first offending place. A shared but acyclic sub-value is fine (it is copied twice).

Both walks are iterative (an explicit stack), so 10,000 levels of nesting work. Cycle
detection tracks only the containers on the current path, never a global "seen" set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, TypeAlias

from .errors import NotJsonError

__all__ = (
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "find_non_json",
    "is_json",
    "snapshot_json",
    "thaw_json",
)

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable")


class FrozenDict(dict[str, Any]):
    """A deep-frozen JSON object: a ``dict`` whose every mutating method raises ``TypeError``.

    Constructing one snapshots its contents (nested values become frozen too), so a
    ``FrozenDict`` is always lossless JSON.

    Example:
        >>> d = FrozenDict({"a": [1, 2]})
        >>> d == {"a": [1, 2]}, type(d["a"]).__name__
        (True, 'FrozenList')
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        snap = snapshot_json(dict(*args, **kwargs))
        assert type(snap) is FrozenDict
        return snap

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # contents set in __new__
        pass

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable
    __ior__ = _immutable

    def __reduce__(self) -> tuple[Any, ...]:
        return (_frozen_dict_from, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """A deep-frozen JSON array: a ``list`` whose every mutating method raises ``TypeError``."""

    __slots__ = ()

    def __new__(cls, iterable: Iterable[Any] = ()) -> FrozenList:
        snap = snapshot_json(list(iterable))
        assert type(snap) is FrozenList
        return snap

    def __init__(self, iterable: Iterable[Any] = ()) -> None:  # contents set in __new__
        pass

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = reverse = sort = clear = _immutable

    def __reduce__(self) -> tuple[Any, ...]:
        return (_frozen_list_from, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"

    __hash__ = None  # lists are unhashable; keep it so


def _new_dict() -> FrozenDict:
    return dict.__new__(FrozenDict)


def _new_list() -> FrozenList:
    return list.__new__(FrozenList)


def _frozen_dict_from(plain: dict[str, Any]) -> FrozenDict:
    # Unpickling: the contents were snapshotted where the value was made, and its nested
    # arrays and objects come back frozen first, so the copy needs no second walk.
    made = _new_dict()
    dict.update(made, plain)
    return made


def _frozen_list_from(plain: list[Any]) -> FrozenList:
    made = _new_list()
    list.extend(made, plain)
    return made


_dict_set = dict.__setitem__
_list_append = list.append
_SCALARS = frozenset({str, int, bool, type(None)})
_FROZEN = frozenset({FrozenDict, FrozenList})

# A frame is (parent frame, key-or-index); it makes the path only when an error needs it.
_Frame: TypeAlias = "tuple[Any, str | int] | None"


def _path_of(frame: _Frame, root: str) -> str:
    parts: list[str] = []
    while frame is not None:
        frame, key = frame
        parts.append(f"[{key}]" if type(key) is int else f".{key}")
    return root + "".join(reversed(parts))


def _float_problem(v: float) -> str | None:
    if v != v:
        return "NaN is not a JSON number"
    if v in (math.inf, -math.inf):
        return "an infinity is not a JSON number"
    if v == 0.0 and math.copysign(1.0, v) < 0:
        return "-0.0 is not lossless JSON"
    return None


def _kind(v: object) -> str:
    t = type(v)
    if t is tuple:
        return "a tuple is not a JSON array"
    if isinstance(v, dict):
        return f"{t.__name__} is not a plain dict"
    if isinstance(v, list):
        return f"{t.__name__} is not a plain list"
    return f"{t.__name__} is not a JSON value"


def snapshot_json(value: Any, path: str = "value") -> Any:
    """Return a detached, deep-frozen copy of ``value``, or raise :class:`NotJsonError`.

    Args:
        value: any Python object.
        path: the label of the root in error paths (``value.a[0].b``).

    Raises:
        NotJsonError: naming the first offending path (cycles, NaN, tuples, non-str keys…).

    Example:
        >>> snapshot_json({"a": [1, "x", None]})
        FrozenDict({'a': FrozenList([1, 'x', None])})
    """
    t = type(value)
    if t in _SCALARS or t in _FROZEN:
        return value
    if t is float:
        problem = _float_problem(value)
        if problem is not None:
            raise NotJsonError(f"{path} is not lossless JSON: {problem}", path)
        return value
    if t is not dict and t is not list:
        raise NotJsonError(f"{path} is not lossless JSON: {_kind(value)}", path)
    try:
        return _snapshot_shallow(value, 0)
    except _Fallback:
        return _snapshot_container(value, path)


class _Fallback(Exception):
    """The fast path gives up (deep, cyclic or bad value): the iterative walk decides."""


_FAST_DEPTH = 32


def _snapshot_shallow(value: Any, depth: int) -> Any:
    """A recursive copy for the common small, shallow value; any doubt raises _Fallback."""
    if depth > _FAST_DEPTH:
        raise _Fallback
    if type(value) is dict:
        out: Any = _new_dict()
        for k, v in value.items():
            if type(k) is not str:
                raise _Fallback
            tv = type(v)
            if tv in _SCALARS or tv in _FROZEN or (tv is float and _float_problem(v) is None):
                _dict_set(out, k, v)
            else:
                _dict_set(out, k, _snapshot_shallow(v, depth + 1))
        return out
    if type(value) is list:
        out = _new_list()
        for v in value:
            tv = type(v)
            if tv in _SCALARS or tv in _FROZEN or (tv is float and _float_problem(v) is None):
                _list_append(out, v)
            else:
                _list_append(out, _snapshot_shallow(v, depth + 1))
        return out
    raise _Fallback


def _snapshot_container(value: Any, root: str) -> Any:
    def fail(frame: _Frame, problem: str) -> NoReturn:
        where = _path_of(frame, root)
        raise NotJsonError(f"{where} is not lossless JSON: {problem}", where)

    out = _new_dict() if type(value) is dict else _new_list()
    on_path: set[int] = set()
    # stack items: (source, destination, frame) to fill, or an int id to leave the path
    stack: list[Any] = [(value, out, None)]
    while stack:
        item = stack.pop()
        if type(item) is int:
            on_path.discard(item)
            continue
        src, dst, frame = item
        on_path.add(id(src))
        stack.append(id(src))
        is_dict = type(src) is dict
        pairs: Iterator[tuple[Any, Any]] = iter(src.items()) if is_dict else enumerate(src)
        nested: list[Any] = []
        for k, v in pairs:
            if is_dict and type(k) is not str:
                fail(frame, f"key {k!r} is not a string")
            tv = type(v)
            if tv in _SCALARS or tv in _FROZEN:
                child: Any = v
            elif tv is float:
                problem = _float_problem(v)
                if problem is not None:
                    fail((frame, k), problem)
                child = v
            elif tv is dict or tv is list:
                if id(v) in on_path:
                    fail((frame, k), "circular reference")
                child = _new_dict() if tv is dict else _new_list()
                nested.append((v, child, (frame, k)))
            else:
                fail((frame, k), _kind(v))
            if is_dict:
                _dict_set(dst, k, child)
            else:
                _list_append(dst, child)
        stack.extend(reversed(nested))
    return out


def find_non_json(value: Any, path: str = "value") -> tuple[str, str] | None:
    """Return ``(path, problem)`` for the first non-lossless place in ``value``, else ``None``.

    The same rule as :func:`snapshot_json`, without copying.
    """
    try:
        _check(value, path)
    except NotJsonError as err:
        return err.path, err.message
    return None


def is_json(value: Any) -> bool:
    """Whether ``value`` is lossless JSON (the :func:`snapshot_json` rule)."""
    return find_non_json(value) is None


def _check(value: Any, root: str) -> None:
    t = type(value)
    if t in _SCALARS or t in _FROZEN:
        return
    if t is float or (t is not dict and t is not list):
        snapshot_json(value, root)
        return
    on_path: set[int] = set()
    stack: list[Any] = [(value, None)]
    while stack:
        item = stack.pop()
        if type(item) is int:
            on_path.discard(item)
            continue
        src, frame = item
        on_path.add(id(src))
        stack.append(id(src))
        is_dict = type(src) is dict
        nested: list[Any] = []
        for k, v in src.items() if is_dict else enumerate(src):
            if is_dict and type(k) is not str:
                where = _path_of(frame, root)
                raise NotJsonError(
                    f"{where} is not lossless JSON: key {k!r} is not a string", where
                )
            tv = type(v)
            if tv in _SCALARS or tv in _FROZEN:
                continue
            if tv is dict or tv is list:
                if id(v) in on_path:
                    where = _path_of((frame, k), root)
                    raise NotJsonError(f"{where} is not lossless JSON: circular reference", where)
                nested.append((v, (frame, k)))
            else:
                snapshot_json(v, _path_of((frame, k), root))
        stack.extend(reversed(nested))


def thaw_json(value: Any) -> Any:
    """A detached, mutable deep copy (plain ``dict``/``list``) of a lossless JSON value.

    Iterative, so deep values (5,000 levels) copy without recursion.
    """
    t = type(value)
    if t is not dict and t is not list and t is not FrozenDict and t is not FrozenList:
        return value
    out: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, out)]
    while stack:
        src, dst = stack.pop()
        if isinstance(src, dict):
            for k, v in src.items():
                if isinstance(v, dict | list):
                    child: Any = {} if isinstance(v, dict) else []
                    stack.append((v, child))
                    dst[k] = child
                else:
                    dst[k] = v
        else:
            for v in src:
                if isinstance(v, dict | list):
                    child = {} if isinstance(v, dict) else []
                    stack.append((v, child))
                    dst.append(child)
                else:
                    dst.append(v)
    return out
