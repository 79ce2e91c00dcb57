"""The schema layer: the author DSL, the enforced JSON-Schema subset, and validation.

- :func:`value_schema_to_json_schema` / :func:`parameter_schema_to_json_schema` compile
  author specs (R-DSL) and assert the result;
- :func:`assert_supported_json_schema` / :func:`assert_object_json_schema` check raw
  schemas against the enforced subset (R-JS);
- :func:`validate_json_schema_value` is the reference validator (R-VAL), and
  :func:`compile_validator` its compiled twin, used on every tool call;
- :func:`validate_args` validates tool arguments against a parameter map.
"""

from __future__ import annotations

from ._codegen import compile_validator as compile_validator
from ._dsl import parameter_schema_to_json_schema as parameter_schema_to_json_schema
from ._dsl import validate_args as validate_args
from ._dsl import value_schema_to_json_schema as value_schema_to_json_schema
from ._subset import assert_object_json_schema as assert_object_json_schema
from ._subset import assert_supported_json_schema as assert_supported_json_schema
from ._validate import validate_json_schema_value as validate_json_schema_value

__all__ = (
    "assert_object_json_schema",
    "assert_supported_json_schema",
    "compile_validator",
    "parameter_schema_to_json_schema",
    "validate_args",
    "validate_json_schema_value",
    "value_schema_to_json_schema",
)
