"""The public surface of ``toolray.code``: curated names, the failure value, the allow-list."""

from __future__ import annotations

import pickle

import pytest

import toolray.code
from toolray.code import DEFAULT_ALLOWED_IMPORTS, FAILURE_KINDS, CodeRunOutcome, code_run_failed
from toolray.errors import CodeRunFailedError


def test_all_is_curated_and_resolvable() -> None:
    names = toolray.code.__all__
    assert all(hasattr(toolray.code, name) for name in names)
    public = {n for n in vars(toolray.code) if not n.startswith("_") and n != "annotations"}
    assert public == set(names)


def test_code_run_failed_builds_the_c_code_14_text_and_pickles() -> None:
    err = code_run_failed("exception", "ValueError: x", ["a", "b"])
    assert isinstance(err, CodeRunFailedError)
    assert (err.code, err.message) == (
        "CODE_RUN_FAILED",
        "code run failed (exception): ValueError: x\nCaptured output:\na\nb",
    )
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.message, back.kind) == (CodeRunFailedError, err.message, "exception")
    assert code_run_failed("syntax", "boom").message == "code run failed (syntax): boom"


def test_failure_kinds_use_the_original_words_where_it_has_them() -> None:
    assert {"exception", "invalid-output", "output-limit", "worker-exit", "timeout"} <= (
        FAILURE_KINDS
    )
    assert {"syntax", "import", "memory", "protocol"} <= FAILURE_KINDS


def test_the_default_allow_list_is_the_api_one() -> None:
    assert (
        frozenset(
            [
                "asyncio",
                "json",
                "math",
                "cmath",
                "re",
                "datetime",
                "time",
                "itertools",
                "collections",
                "functools",
                "operator",
                "statistics",
                "random",
                "string",
                "textwrap",
                "decimal",
                "fractions",
                "typing",
                "dataclasses",
                "enum",
                "heapq",
                "bisect",
                "copy",
                "pprint",
                "uuid",
                "hashlib",
                "base64",
                "difflib",
                "unicodedata",
            ]
        )
        == DEFAULT_ALLOWED_IMPORTS
    )
    never = "os sys subprocess socket shutil pathlib ctypes importlib multiprocessing threading"
    assert DEFAULT_ALLOWED_IMPORTS.isdisjoint((never + " signal").split())


def test_outcome_is_a_frozen_value() -> None:
    out = CodeRunOutcome(logs=["x"], result=1, has_result=True)
    with pytest.raises(AttributeError):
        out.result = 2  # type: ignore[misc]
    assert CodeRunOutcome() == CodeRunOutcome(logs=[], result=None, has_result=False)
