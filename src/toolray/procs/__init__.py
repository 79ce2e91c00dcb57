r"""Child processes made cheaply from a warm template: the substrate under Code Mode.

A :class:`Template` starts one *template* (zygote) process with ``subprocess`` — never a
fork of the caller, which may be a Ray worker with many threads — running a small serve
loop (``_zygote.py``, standard library only, run by path). The template imports what the
:class:`TemplateSpec` lists (``preload``, then the ``init`` hook), then forks a child each
time the host asks; the child inherits everything loaded, so a fork costs a few
milliseconds however heavy the preload was.

The contract:

- **Fork on request.** ``template.fork(args)`` (blocking), ``await
  template.fork_async(args)`` or ``template.fork_nowait(args)`` (a future) returns a
  :class:`Child`. The host makes a connected ``AF_UNIX`` stream socket pair per child and
  passes one end to the template (``SCM_RIGHTS``): the child finds it on fd 3
  (``ChildContext.channel``), the host keeps ``child.channel``. With
  ``capture_stderr=True`` the child's fd 2 is a pipe whose read end is ``child.stderr``
  (else it shares the template's stderr); its fd 0 is ``/dev/null`` and every other
  descriptor is closed. Each child is the leader of its own process group, and with
  ``pid_namespace=True`` pid 1 of a new pid namespace (where the template may make one;
  ``child.pid_namespace_error`` says why not).
- **Loads.** ``template.load(args, data)`` runs the spec's ``loader(args, data)`` in the
  running template, between forks (``data``, any size, travels in a memory file): children
  forked afterwards inherit what it loaded — a tool's code shipped after the template
  booted, say. A template that restarts has lost its loads (``load`` returns the pid of
  the template that got it).
- **The child runs the entry.** ``TemplateSpec.entry`` (``"pkg.module:function"`` or
  ``"/abs/file.py:function"``) is called in the child with a ``ChildContext`` (``channel``,
  ``args``, ``set_title(argv, env)``); its ``int`` return value is the exit code, an
  exception exits 1 with its traceback on stderr. What it does with its channel — one
  request or many — is up to it. The child never returns into the template.
- **Lifecycle.** The template is every child's parent (and a child subreaper, so it also
  reaps — and kills — anything a child leaves behind: a process it adopts, a descendant
  whose parent died, is killed at once and counted in ``statistics().orphans`` — unless
  the host adopted it first: ``await template.adopt_async(pid, channel)`` makes a copy a
  child forked of itself, and the host verified, one of its children before it arrives). It
  reports each child's end — exit code or signal, CPU seconds, peak RSS — which
  ``child.status`` holds and ``await child.wait_exit()`` / ``child.wait_exit_blocking()``
  return (an :class:`ExitStatus`).
  ``child.kill()`` signals the child's process group through the template, which never
  signals a pid it has already reaped. Children die with the template (``SIGKILL`` as
  their parent-death signal); a dead template is noticed at once (its socket closes):
  pending forks fail with :class:`TemplateError`, live children settle as ``lost``, and
  the next fork starts a new template. ``template.stop()`` kills and reaps every child
  and ends the template; the template also stops when the host goes away.
- **Frames.** :func:`encode_frame` / :class:`FrameDecoder` are the framed JSON protocol
  both Code Mode and other users speak on a child's channel: a 4-byte big-endian length,
  then one UTF-8 JSON object with an ``op``; a frame may carry raw bytes after the JSON
  text (``encode_frame(message, attachment)``; ``FrameDecoder(attachments=True)``).
  Decoding is bounded (:data:`MAX_FRAME_BYTES` bytes, :data:`MAX_ELEMENTS` values,
  :data:`MAX_DEPTH` levels): a frame past a bound is refused before any value is built.

Example:
    >>> from toolray.procs import Template, TemplateSpec
    >>> template = Template(TemplateSpec(entry="builtins:print"))
    >>> child = template.fork()
    >>> child.wait_exit_blocking(10).code
    0
    >>> child.close()
    >>> template.stop()
"""

from __future__ import annotations

from ._child import Child as Child
from ._frames import ATTACHMENT as ATTACHMENT
from ._frames import MAX_DEPTH as MAX_DEPTH
from ._frames import MAX_ELEMENTS as MAX_ELEMENTS
from ._frames import MAX_FRAME_BYTES as MAX_FRAME_BYTES
from ._frames import FrameDecoder as FrameDecoder
from ._frames import ProtocolError as ProtocolError
from ._frames import decode_json as decode_json
from ._frames import encode_frame as encode_frame
from ._template import Template as Template
from ._values import ExitStatus as ExitStatus
from ._values import TemplateError as TemplateError
from ._values import TemplateSpec as TemplateSpec
from ._values import TemplateStatistics as TemplateStatistics
from ._zygote import CHANNEL_FD as CHANNEL_FD
from ._zygote import ChildContext as ChildContext

__all__ = (
    "ATTACHMENT",
    "CHANNEL_FD",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_FRAME_BYTES",
    "Child",
    "ChildContext",
    "ExitStatus",
    "FrameDecoder",
    "ProtocolError",
    "Template",
    "TemplateError",
    "TemplateSpec",
    "TemplateStatistics",
    "decode_json",
    "encode_frame",
)
