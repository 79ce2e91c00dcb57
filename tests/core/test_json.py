"""Lossless JSON snapshots and frozen containers (P-ARGS-3)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolray import FrozenDict, FrozenList, NotJsonError, snapshot_json
from toolray._json import find_non_json, is_json, thaw_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0 and math.copysign(1, f) < 0)
    )
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=25,
)


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -5, 2**80, 1.5, -2.25, "", "x", [], {}, [1, [2, {"a": None}]]],
)
def test_p_args_3_accepts_lossless_values(value: object) -> None:
    assert snapshot_json(value) == value


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (math.nan, "value"),
        (math.inf, "value"),
        (-math.inf, "value"),
        (-0.0, "value"),
        ((1, 2), "value"),
        ({1, 2}, "value"),
        (b"x", "value"),
        (Decimal("1.5"), "value"),
        (object(), "value"),
        ({"a": [1, {"b": math.nan}]}, "value.a[1].b"),
        ({"a": {1: "x"}}, "value.a"),
        ({"f": lambda: 1}, "value.f"),
        ([[[(1,)]]], "value[0][0][0]"),
    ],
    ids=lambda v: re.sub(r" at 0x[0-9a-f]+", "", repr(v))[:30],  # the same in every process
)
def test_p_args_3_rejects_with_path(value: object, path: str) -> None:
    with pytest.raises(NotJsonError) as info:
        snapshot_json(value)
    assert info.value.code == "NOT_JSON"
    assert info.value.path == path
    assert path in info.value.message


def test_p_args_3_rejects_dict_and_list_subclasses() -> None:
    class D(dict):  # type: ignore[type-arg]
        pass

    class L(list):  # type: ignore[type-arg]
        pass

    with pytest.raises(NotJsonError):
        snapshot_json({"a": D()})
    with pytest.raises(NotJsonError):
        snapshot_json([L()])


def test_p_args_3_rejects_cycles_and_names_the_reentry() -> None:
    a: dict[str, object] = {"x": []}
    a["x"].append(a)  # type: ignore[attr-defined]
    with pytest.raises(NotJsonError) as info:
        snapshot_json(a)
    assert info.value.path == "value.x[0]"
    assert "circular" in info.value.message


def test_p_args_3_shared_acyclic_subvalue_is_copied_twice() -> None:
    shared = {"k": [1, 2]}
    snap = snapshot_json({"a": shared, "b": shared, "c": [shared, shared]})
    assert snap == {"a": shared, "b": shared, "c": [shared, shared]}
    assert snap["a"] is not shared


def test_snapshot_is_detached_and_deep_frozen() -> None:
    source = {"a": [1, {"b": "c"}]}
    snap = snapshot_json(source)
    source["a"].append(2)  # type: ignore[attr-defined]
    assert snap == {"a": [1, {"b": "c"}]}
    assert type(snap) is FrozenDict
    assert type(snap["a"]) is FrozenList
    with pytest.raises(TypeError):
        snap["a"].append(3)
    with pytest.raises(TypeError):
        snap["a"][1]["b"] = "d"


def test_ten_thousand_levels_of_nesting() -> None:
    value: object = "leaf"
    for _ in range(10_000):
        value = [value]
    snap = snapshot_json(value)
    depth = 0
    while isinstance(snap, list):
        snap = snap[0]
        depth += 1
    assert (depth, snap) == (10_000, "leaf")
    deep: object = 1
    for _ in range(10_000):
        deep = {"d": deep}
    assert is_json(deep)
    thawed = thaw_json(snapshot_json(deep))
    levels = 0
    while isinstance(thawed, dict):
        assert type(thawed) is dict
        thawed = thawed["d"]
        levels += 1
    assert (levels, thawed) == (10_000, 1)


def test_deep_rejection_names_the_path() -> None:
    value: object = {1.5}
    for _ in range(3_000):
        value = [value]
    found = find_non_json(value)
    assert found is not None
    assert found[0] == "value" + "[0]" * 3_000


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.__setitem__("x", 1),
        lambda d: d.__delitem__("a"),
        lambda d: d.clear(),
        lambda d: d.pop("a"),
        lambda d: d.popitem(),
        lambda d: d.setdefault("x", 1),
        lambda d: d.update(x=1),
    ],
)
def test_frozen_dict_mutators_raise(mutate: object) -> None:
    d = FrozenDict({"a": 1})
    with pytest.raises(TypeError):
        mutate(d)  # type: ignore[operator]
    assert d == {"a": 1}


def test_frozen_dict_ior_raises() -> None:
    d = FrozenDict({"a": 1})
    with pytest.raises(TypeError):
        d |= {"b": 2}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda v: v.append(1),
        lambda v: v.extend([1]),
        lambda v: v.insert(0, 1),
        lambda v: v.pop(),
        lambda v: v.remove(1),
        lambda v: v.reverse(),
        lambda v: v.sort(),
        lambda v: v.clear(),
        lambda v: v.__setitem__(0, 9),
        lambda v: v.__delitem__(0),
    ],
)
def test_frozen_list_mutators_raise(mutate: object) -> None:
    v = FrozenList([1, 2])
    with pytest.raises(TypeError):
        mutate(v)  # type: ignore[operator]
    assert v == [1, 2]


def test_frozen_list_augmented_assignment_raises() -> None:
    v = FrozenList([1])
    with pytest.raises(TypeError):
        v += [2]
    with pytest.raises(TypeError):
        v *= 2


def test_frozen_containers_compare_dump_copy_and_pickle() -> None:
    snap = snapshot_json({"a": [1, {"b": None}]})
    assert snap == {"a": [1, {"b": None}]}
    assert json.dumps(snap) == json.dumps({"a": [1, {"b": None}]})
    back = pickle.loads(pickle.dumps(snap))
    assert back == snap
    assert type(back) is FrozenDict
    assert type(back["a"]) is FrozenList
    assert copy.copy(snap) is snap
    assert copy.deepcopy(snap) is snap
    with pytest.raises(TypeError):
        back["a"].append(2)  # unpickled without a second walk, and still frozen
    with pytest.raises(TypeError):
        back["c"] = 1


@given(json_values)
@settings(max_examples=100, deadline=None)
def test_a_pickled_snapshot_comes_back_equal_and_frozen_all_the_way_down(value: object) -> None:
    snap = snapshot_json(value)
    back = pickle.loads(pickle.dumps(snap, protocol=5))
    assert back == snap
    assert is_json(back)
    stack = [back]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            assert type(item) is FrozenDict
            stack.extend(item.values())
        elif isinstance(item, list):
            assert type(item) is FrozenList
            stack.extend(item)


def test_frozen_constructors_snapshot_their_input() -> None:
    with pytest.raises(NotJsonError):
        FrozenDict({"a": {1, 2}})
    assert type(FrozenList([[1]])[0]) is FrozenList


def test_snapshot_of_frozen_value_may_return_it() -> None:
    snap = snapshot_json({"a": 1})
    assert snapshot_json(snap) is snap


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_property_snapshot_equals_value_and_is_immutable(value: object) -> None:
    snap = snapshot_json(value)
    assert snap == value
    if isinstance(snap, dict):
        with pytest.raises(TypeError):
            snap["new"] = 1
    if isinstance(snap, list):
        with pytest.raises(TypeError):
            snap.append(1)
    assert thaw_json(snap) == value
