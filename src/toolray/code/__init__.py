r"""Code Mode's runtime: run a model's Python program whose only way out is its bindings.

A :class:`CodeRuntime` runs one program with a mapping of *bindings* (``name -> async
(args) -> value``) and returns a :class:`CodeRunOutcome` (its ``print()`` lines and the value
of its last expression), or raises: ``CodeRunFailedError`` (``code run failed (<kind>):
<message>`` plus ``\nCaptured output:\n<logs>``, C-CODE-14), ``ToolTimeoutError`` past the
deadline, ``AbortError`` when the signal fires. :class:`PythonRuntime` is the shipped one.

The program (Python, top-level ``await`` allowed) sees each binding as an async function in
its globals and in a module ``tools`` (``await tools.search(query="x")``, ``await
search({"query": "x"})``, or positionally when the binding has ``parameter_names``). A
failed call raises ``ToolCallError`` (a global; ``.tool_name``; its message is the failure
message only, C-CODE-5). ``print()`` and ``sys.stdout`` writes become ``logs`` (one entry per
``print()`` call, without its trailing newline); ``print(file=f)`` to any other file writes
to ``f``; the process's own fd 1 and fd 2 go to a diagnostics pipe, never to ``logs``.

Failure kinds (``CodeRunFailedError.kind``): ``syntax``, ``exception`` (uncaught, with
``SystemExit``; the message is ``Type: text``), ``import`` (outside ``allowed_imports``),
``invalid-output`` (the last expression is not lossless JSON), ``output-limit`` (the result
exceeds a frame), ``memory``, ``timeout`` (``cpu_s`` used up), ``worker-exit`` (the process
died), ``protocol`` (the process broke the protocol).

The protocol between host and child (``_child.py``, run by path as ``python -I -S -B``):
each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one
object with an ``op`` (at most 16 MiB; NaN and infinities are rejected). The child keeps its
protocol pipes on private descriptors and points fd 1 at stderr, so stray writes never
reach the frame stream. Host → child, on the child's stdin::

    {"op": "run", "program", "bindings": [[name, parameter names | null]], "allowed",
     "memory_bytes", "cpu_s"}
    {"op": "reply", "id", "ok": true, "value"}  |  {"op": "reply", "id", "ok": false, "error"}

Child → host, on its stdout::

    {"op": "ready"}                        booted (imports done); it then waits for "run"
    {"op": "started"}                      the program starts: the deadline starts here
    {"op": "log", "text"}                  one print()
    {"op": "call", "id", "name", "args"}   one binding call; ids are unique, many may be
                                           outstanding; replies come in any order
    {"op": "done", "has_result", "result"} the program finished
    {"op": "failed", "kind", "message"}    the program failed (a child-side kind)

Bindings are invoked in the order the program called them (the host reads the calls in
order and starts each at once, in a task of its own). Arguments and values cross as lossless
JSON (C-CODE-11): the child rejects a non-JSON argument before sending anything (the call is
not dispatched), and the host checks both directions again. When the run settles the
process group is killed, the process reaped and its directory removed; bindings still in
flight then are not awaited and their results are discarded (the caller owns their
lifecycle, C-CODE-12). Nothing runs after settlement, so no binding is called late.
"""

from __future__ import annotations

from ._confinement import Confinement as Confinement
from ._runtime import CodeRuntimeStatistics as CodeRuntimeStatistics
from ._runtime import PythonRuntime as PythonRuntime
from ._types import DEFAULT_ALLOWED_IMPORTS as DEFAULT_ALLOWED_IMPORTS
from ._types import FAILURE_KINDS as FAILURE_KINDS
from ._types import Binding as Binding
from ._types import BindingError as BindingError
from ._types import CodeRunOutcome as CodeRunOutcome
from ._types import CodeRuntime as CodeRuntime
from ._types import code_run_failed as code_run_failed

__all__ = (
    "DEFAULT_ALLOWED_IMPORTS",
    "FAILURE_KINDS",
    "Binding",
    "BindingError",
    "CodeRunOutcome",
    "CodeRuntime",
    "CodeRuntimeStatistics",
    "Confinement",
    "PythonRuntime",
    "code_run_failed",
)
