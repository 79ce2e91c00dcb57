"""Per-call fault isolation: a tool body's process, and the body runner both modes share.

For runtimes that run tool bodies in other processes (the Ray layer's workers), not for
applications. With ``isolation="call"`` a worker runs each call alone in a *call process*
forked from a warm template (a small Python holding the tools' code); a crash,
an out-of-memory end or a kill at the deadline ends that process only, and so fails that
call only. With ``"shared"`` the worker runs the bodies itself on a :class:`BodyHost` —
which is also what runs the one body inside a call process.

- :class:`BodyHost` runs bodies (async on the loop, sync in threads), addressable by token:
  ``abort`` fires the body's signal, ``interrupt`` cancels its task or injects
  :class:`ToolInterrupted` into its thread.
- :class:`CallOutcome` is what one call comes to; its error is data (:class:`ErrorData`:
  the raised class's name, message, traceback text, code), made where the body ran
  (:func:`error_data`) and raised again by the executor (:func:`rebuild_error`: toolray's
  own classes by name, every other class as a stand-in keeping its name). Outcomes leave a
  worker as JSON too (:func:`outcomes_bytes`, :func:`outcomes_of`): nothing a body chose is
  ever unpickled outside its own process.
- The records a worker and a call process exchange (:class:`RunCall`, :class:`AbortCall`,
  :class:`InterruptCall`, :class:`CallDone`, :class:`CallOverdue`, :class:`NestedRequest`,
  :class:`NestedAnswer`) cross as length-prefixed JSON frames (:func:`encode`,
  :class:`FrameReader`); an environment instance's process also takes :class:`EnvOp`
  (its instance's own operations; :func:`pack_restore`) and answers :class:`EnvDone`.
- ``isolation="sandbox"``: a call process confined by Code Mode's layers before its one
  call (:func:`sandbox_config`, :func:`sandbox_template`; :func:`sandbox_confinement`
  reports what this host gives one); it says :class:`Ready` with its layers first.
- :func:`call_template` makes the ``toolray.procs`` template call processes are forked
  from (it holds the tools' definitions, loaded as they arrive); :class:`ProcessLink` is one
  call process on the worker's loop; :func:`describe_exit` says in words how one ended
  (:data:`MEMORY_EXIT`: its memory limit).
"""

from ._bodies import BodyHost as BodyHost
from ._bodies import ContextFactory as ContextFactory
from ._bodies import HostStats as HostStats
from ._bodies import body_limit as body_limit
from ._child import MEMORY_EXIT as MEMORY_EXIT
from ._context import RemoteToken as RemoteToken
from ._context import context_from_ident as context_from_ident
from ._context import refuse_in_loop as refuse_in_loop
from ._data import outcomes_bytes as outcomes_bytes
from ._data import outcomes_of as outcomes_of
from ._env_messages import EnvDone as EnvDone
from ._env_messages import EnvOp as EnvOp
from ._env_messages import Parts as Parts
from ._env_messages import in_parts as in_parts
from ._env_messages import pack_restore as pack_restore
from ._link import ProcessLink as ProcessLink
from ._link import call_template as call_template
from ._link import describe_exit as describe_exit
from ._messages import AbortCall as AbortCall
from ._messages import CallDone as CallDone
from ._messages import CallOverdue as CallOverdue
from ._messages import FrameReader as FrameReader
from ._messages import InterruptCall as InterruptCall
from ._messages import Message as Message
from ._messages import NestedAnswer as NestedAnswer
from ._messages import NestedRequest as NestedRequest
from ._messages import ProtocolError as ProtocolError
from ._messages import Ready as Ready
from ._messages import RunCall as RunCall
from ._messages import encode as encode
from ._outcome import MISSING as MISSING
from ._outcome import CallOutcome as CallOutcome
from ._outcome import ErrorData as ErrorData
from ._outcome import OutcomeStatus as OutcomeStatus
from ._outcome import RemoteError as RemoteError
from ._outcome import RemoteHarnessError as RemoteHarnessError
from ._outcome import ToolInterrupted as ToolInterrupted
from ._outcome import aborted as aborted
from ._outcome import error_data as error_data
from ._outcome import rebuild_error as rebuild_error
from ._sandbox import SANDBOX_LAYERS as SANDBOX_LAYERS
from ._sandbox import missing_layers as missing_layers
from ._sandbox import sandbox_config as sandbox_config
from ._sandbox import sandbox_confinement as sandbox_confinement
from ._sandbox import sandbox_template as sandbox_template

__all__ = (
    "MEMORY_EXIT",
    "MISSING",
    "SANDBOX_LAYERS",
    "AbortCall",
    "BodyHost",
    "CallDone",
    "CallOutcome",
    "CallOverdue",
    "ContextFactory",
    "EnvDone",
    "EnvOp",
    "ErrorData",
    "FrameReader",
    "HostStats",
    "InterruptCall",
    "Message",
    "NestedAnswer",
    "NestedRequest",
    "OutcomeStatus",
    "Parts",
    "ProcessLink",
    "ProtocolError",
    "Ready",
    "RemoteError",
    "RemoteHarnessError",
    "RemoteToken",
    "RunCall",
    "ToolInterrupted",
    "aborted",
    "body_limit",
    "call_template",
    "context_from_ident",
    "describe_exit",
    "encode",
    "error_data",
    "in_parts",
    "missing_layers",
    "outcomes_bytes",
    "outcomes_of",
    "pack_restore",
    "rebuild_error",
    "refuse_in_loop",
    "sandbox_config",
    "sandbox_confinement",
    "sandbox_template",
)
