"""A worker's environment instances with ``isolation="call"``: each in a process of its own.

An instance's process is forked from the worker's template (which loaded the environment's
definition), then opened (``create(config)``) or restored from a snapshot. Its calls go to
it, several at once if they are concurrency-safe (its executor keeps the instance's turns);
its operations (snapshot, run, park, close, fork) one at a time. When the process dies on
its own — a crash, the OOM killer, a body's ``os._exit`` — every call in flight on it ends
``lost`` and the instance is remembered as lost (a tombstone answers every later use), so
its executor reports ``ENVIRONMENT_LOST`` until the agent opens a new one. A kill ordered
by the cancellation ladder ends the call it was for ``killed`` (its timeout or abort) and
the instance with it. A process a ``park`` or ``close`` ended leaves no tombstone.

A ``"process"`` fork copies the instance's process itself (copy-on-write, whatever the
state's size; ``_env_fork`` says how the copy connects back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from toolray import EnvironmentLostError
from toolray.isolation import (
    CallDone,
    CallOutcome,
    EnvDone,
    EnvOp,
    Message,
    NestedAnswer,
    NestedRequest,
    Parts,
    ProcessLink,
    RunCall,
    describe_exit,
    error_data,
    in_parts,
    pack_restore,
)
from toolray.procs import Child, ProtocolError

from ._call_code import TemplateCode
from ._env_fork import copy_child

__all__ = ("ProcessInstances",)

Nested = Callable[[Mapping[str, object], NestedRequest], Awaitable[NestedAnswer]]

_MAX_TOMBSTONES = 4096
_FORK_CONNECT_S = 10.0
_EXIT_WAIT_S = 2.0


@dataclass(eq=False)
class _Proc:
    iid: str
    key: str
    link: ProcessLink
    calls: dict[str, asyncio.Future[CallOutcome]] = field(default_factory=dict)
    idents: dict[str, Mapping[str, object]] = field(default_factory=dict)
    op: asyncio.Future[EnvDone] | None = None
    parts: Parts = field(default_factory=Parts)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ending: bool = False
    killed_for: str = ""


class ProcessInstances:
    """The instance processes of one worker."""

    def __init__(self, code: TemplateCode, *, memory_mb: int, nested: Nested) -> None:
        self._code = code
        self._memory_mb = memory_mb
        self._nested = nested
        self._procs: dict[str, _Proc] = {}
        self._by_link: dict[int, _Proc] = {}
        self._tokens: dict[str, str] = {}  # a call's token → its instance (control lane)
        self._tombstones: OrderedDict[str, str] = OrderedDict()
        self._killed: set[str] = set()  # calls whose kill took their instance's process
        self._spares: dict[str, asyncio.Future[tuple[Child, set[str]]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.opened = self.lost = 0

    def __len__(self) -> int:
        return len(self._procs)

    def pids(self) -> tuple[int, ...]:
        """The live instances' processes."""
        return tuple(p.link.pid for p in self._procs.values())

    # ------------------------------------------------------------------ lifecycle
    async def open(
        self, iid: str, key: str, blob: bytes, config: object, snapshot: bytes | None
    ) -> int:
        """A new instance: a process forked, then ``create(config)`` or a restore; its pid."""
        self._loop = asyncio.get_running_loop()
        self._code.learn(key, blob)
        child, known = await self._forked(key)
        proc = self._adopt(iid, key, child, known)
        sent = None if key in proc.link.known else blob
        if snapshot is None:
            op = EnvOp(op="open", key=key, config=config, data=sent)
        else:
            op = EnvOp(op="restore", key=key, data=pack_restore(sent, snapshot))
        try:
            await self._operate(proc, op)
        except BaseException:
            self._end(proc)
            raise
        self.opened += 1
        return proc.link.pid

    async def _forked(self, key: str) -> tuple[Child, set[str]]:
        """A fresh process for an instance of ``key`` (the one forked ahead, if it lives).

        The next one is forked ahead at once, so a warm definition's open waits for no fork.
        """
        spare = self._spares.pop(key, None)
        self._spares[key] = asyncio.ensure_future(self._fork())
        if spare is not None:
            with contextlib.suppress(Exception):
                child, known = await spare
                if child.alive:
                    return child, known
                child.close()
        return await self._fork()

    async def _fork(self) -> tuple[Child, set[str]]:
        known = self._code.loaded()  # what the template holds as it forks
        template = self._code.template()
        child = await template.fork_async({"memory_mb": self._memory_mb, "instance": True})
        return child, known

    def _adopt(self, iid: str, key: str, child: Child, known: set[str]) -> _Proc:
        link = ProcessLink(child, known=known, on_message=self._on_message, on_end=self._ended)
        proc = self._procs[iid] = _Proc(iid, key, link)
        self._by_link[id(link)] = proc
        self._tombstones.pop(iid, None)
        return proc

    def _proc(self, iid: str) -> _Proc:
        proc = self._procs.get(iid)
        if proc is None:
            raise EnvironmentLostError(self._why(iid))
        return proc

    def _why(self, iid: str) -> str:
        return self._tombstones.get(iid, "the worker holds no such instance (it was lost)")

    async def _operate(self, proc: _Proc, op: EnvOp) -> EnvDone:
        """One operation on the instance; its answer, or its failure raised (in words)."""
        async with proc.lock:
            assert self._loop is not None
            proc.op = self._loop.create_future()
            try:
                for part in in_parts(op):
                    proc.link.send(part)
            except ValueError as err:  # it cannot cross: this operation's failure
                raise RuntimeError(f"the {op.op} {err}") from None
            done = await proc.op
        if not done.ok:
            raise RuntimeError(done.error)
        return done

    async def operate(self, iid: str, op: str, data: bytes | None = None) -> bytes | None:
        """``snapshot``, ``run`` (``data``: pickled ``(fn, args)``), ``park`` or ``close``."""
        proc = self._proc(iid)
        ending = op in ("park", "close")
        if ending:
            proc.ending = True  # its end of file is not a loss
        try:
            done = await self._operate(proc, EnvOp(op=op, data=data))
            return done.data
        finally:
            if ending:
                self._end(proc)

    async def discard(self, iid: str) -> None:
        """Free what is left of an instance (nothing of its code runs)."""
        self._tombstones.pop(iid, None)
        proc = self._procs.get(iid)
        if proc is not None:
            proc.ending = True
            self._end(proc)

    def _end(self, proc: _Proc) -> None:
        proc.ending = True
        proc.link.kill()

    # ------------------------------------------------------------------ forks
    async def fork(self, iid: str, new_iid: str, how: str) -> int:
        """A copy of the instance as ``new_iid``: its own process copied, or a callable's."""
        proc = self._proc(iid)
        if how != "process":  # the definition's callable, where the state lives
            copy = await self._operate(proc, EnvOp(op="copy"))
            blob = self._code.blob(proc.key) or b""
            pid: int = await self.open(new_iid, proc.key, blob, None, copy.data or b"")
            return pid

        async def fork(address: str) -> int:
            return (await self._operate(proc, EnvOp(op="fork", address=address))).pid

        child = await copy_child(fork, self._code.template().adopt_async)
        self._adopt(new_iid, proc.key, child, set(proc.link.known))
        self.opened += 1
        return child.pid

    # ------------------------------------------------------------------ calls
    async def run(
        self,
        iid: str,
        token: str,
        key: str,
        blob: bytes | None,
        arguments: object,
        ident: Mapping[str, object],
    ) -> CallOutcome:
        """One call of the instance, in its process; never raises for the body's faults."""
        if blob is not None:  # instances forked from now on hold the tool's code too
            self._code.learn(key, blob)
        outcome = await self._run_once(iid, token, key, blob, arguments, ident)
        if outcome.status == "missing" and self._code.blob(key) is not None:
            proc = self._procs.get(iid)
            if proc is not None:  # its process lacked the code: send it along this time
                proc.link.known.discard(key)
                outcome = await self._run_once(iid, token, key, None, arguments, ident)
        return outcome

    async def _run_once(
        self,
        iid: str,
        token: str,
        key: str,
        blob: bytes | None,
        arguments: object,
        ident: Mapping[str, object],
    ) -> CallOutcome:
        proc = self._procs.get(iid)
        if proc is None:
            return CallOutcome(status="lost", detail=self._why(iid))
        assert self._loop is not None
        done: asyncio.Future[CallOutcome] = self._loop.create_future()
        proc.calls[token] = done
        self._tokens[token] = iid
        token_id = str(ident.get("token", ""))
        proc.idents[token_id] = ident
        plain = {k: v for k, v in ident.items() if k != "home"}
        code = None if key in proc.link.known else (blob or self._code.blob(key))
        run = RunCall(token=token, key=key, blob=code, arguments=arguments, ident=plain)
        try:
            try:
                proc.link.send(run)
            except ValueError as err:  # its arguments cannot cross: its failure, not the instance's
                failed = error_data(RuntimeError(f"the call {err}"))
                return CallOutcome(status="error", error=failed)
            if code is not None:
                proc.link.known.add(key)
            return await done
        finally:
            proc.calls.pop(token, None)
            proc.idents.pop(token_id, None)
            self._tokens.pop(token, None)

    def _on_message(self, link: ProcessLink, message: Message) -> None:
        proc = self._by_link.get(id(link))
        if proc is None:
            return
        match message:
            case CallDone():
                done = proc.calls.get(message.token)
                if done is not None and not done.done():
                    done.set_result(message.outcome)
            case EnvDone():
                try:
                    whole = proc.parts.join(message)
                except ProtocolError:  # an answer past its bound: the process is done
                    link.kill()
                    return
                if isinstance(whole, EnvDone) and proc.op is not None and not proc.op.done():
                    proc.op.set_result(whole)
            case NestedRequest():
                self._spawn(self._answer(proc, message))
            case _:
                link.kill()  # a process that breaks the protocol is done

    async def _answer(self, proc: _Proc, request: NestedRequest) -> None:
        ident = proc.idents.get(request.token, {})
        try:
            answer = await self._nested(ident, request)
        except Exception as exc:
            answer = NestedAnswer(id=request.id, error=error_data(exc))
        proc.link.send(answer)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ endings
    def _ended(self, link: ProcessLink) -> None:
        proc = self._by_link.pop(id(link), None)
        if proc is None:
            return
        if self._procs.get(proc.iid) is proc:
            del self._procs[proc.iid]
        if proc.ending and not proc.calls:
            self._fail_op(proc, "the instance ended")
            return
        self.lost += 1
        self._spawn(self._settle_lost(proc))

    async def _settle_lost(self, proc: _Proc) -> None:
        if proc.killed_for:
            why = proc.killed_for
        else:
            status = await proc.link.wait_exit(_EXIT_WAIT_S)
            why = "its process " + describe_exit(status, self._memory_mb)
        self._bury(proc.iid, why)
        self._fail_op(proc, why)
        for token, done in list(proc.calls.items()):
            if not done.done():
                killed = bool(proc.killed_for) and token in self._killed
                self._killed.discard(token)
                ended = CallOutcome(status="killed" if killed else "lost", detail=why)
                done.set_result(ended)

    def _fail_op(self, proc: _Proc, why: str) -> None:
        if proc.op is not None and not proc.op.done():
            proc.op.set_exception(EnvironmentLostError(why))

    def _bury(self, iid: str, why: str) -> None:
        self._tombstones[iid] = why
        if len(self._tombstones) > _MAX_TOMBSTONES:
            self._tombstones.popitem(last=False)

    # ------------------------------------------------------------------ control lane
    def owns(self, token: str) -> bool:
        """Whether ``token`` is a call of one of these instances (from any thread)."""
        return token in self._tokens

    def abort(self, token: str, message: Message) -> bool:
        """Forward an abort or an interrupt to the call's instance (from any thread)."""
        iid = self._tokens.get(token)
        proc = self._procs.get(iid) if iid is not None else None
        if proc is None or self._loop is None:
            return False
        self._loop.call_soon_threadsafe(proc.link.send, message)
        return True

    def kill(self, token: str) -> bool:
        """The ladder's last step for a call: its instance's process (it is lost with it)."""
        iid = self._tokens.get(token)
        proc = self._procs.get(iid) if iid is not None else None
        if proc is None:
            return False
        proc.killed_for = "its process was killed: a call of it ignored its deadline or an abort"
        self._killed.add(token)
        proc.link.signal_kill()
        return True

    def close(self) -> None:
        """Kill every instance's process, and those forked ahead (the worker is going)."""
        for proc in list(self._procs.values()):
            proc.ending = True
            proc.link.kill()
        for spare in self._spares.values():
            if spare.done():
                _kill_spare(spare)
            else:  # a fork still on its way: the template's stop ends what it made
                spare.cancel()
        self._spares.clear()


def _kill_spare(spare: asyncio.Future[tuple[Child, set[str]]]) -> None:
    if not spare.cancelled() and spare.exception() is None:
        child, _ = spare.result()
        child.kill()
        child.close()
