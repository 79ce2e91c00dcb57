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

Each program runs in a child forked from the runtime's template process
(:mod:`toolray.procs`), confined by the kernel before it is marked warm — namespaces, a
read-only root, Landlock, a seccomp allow-list, resource limits; ``confinement()`` says
which layers are active (see the "Code Mode security" page). The protocol between host and
child (``_child.py``, loaded by path into the template, standard library only): each frame
is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one object with an
``op`` (at most 16 MiB; NaN and infinities are rejected), on the child's socket (fd 3; fd 1
points at stderr, so stray writes never reach the frame stream). Host → child::

    {"op": "run", "program", "bindings": [[name, parameter names | null]]}
    {"op": "reply", "id", "ok": true, "value"}  |  {"op": "reply", "id", "ok": false, "error"}

Child → host::

    {"op": "ready", "confinement"}         confined and waiting (the layers it entered)
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
lifecycle, C-CODE-12). Nothing runs after settlement, so no binding is called late. The
host is bounded against its child: at most ``max_outstanding_calls`` calls in flight (it
stops reading until one settles), at most ``max_run_bytes`` read per run (past it: kind
``protocol``), at most 200 characters of child-supplied text in any of its messages.
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
