"""A loop thread owned by the runtime: blocking calls that work inside a running loop.

``asyncio.run`` fails inside Jupyter (a loop is already running in that thread); running
the coroutine on a loop of our own, in a daemon thread, works from plain scripts and from
inside a running event loop alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import TypeVar

__all__ = ("Portal",)

T = TypeVar("T")


class Portal:
    """One event loop in one daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    try:
                        loop.run_forever()
                    finally:
                        loop.run_until_complete(loop.shutdown_asyncgens())
                        loop.close()

                thread = threading.Thread(target=serve, name="toolray-portal", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run ``coro`` on the portal's loop and wait for it (from any thread)."""
        loop = self._ensure()
        if threading.current_thread().name == "toolray-portal":
            coro.close()
            raise RuntimeError("a blocking toolray call cannot run inside toolray's own loop")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def submit(self, coro: Coroutine[object, object, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the portal's loop without waiting for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure())

    def in_loop(self) -> bool:
        """Whether the caller runs on the portal's own thread (it must not block there)."""
        return threading.current_thread() is self._thread

    def cancel(self, task: asyncio.Future[T]) -> None:
        """Cancel a task of the portal's loop and let it finish (bounded; quiet)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if self.in_loop():
            task.cancel()
            return

        async def stop() -> None:
            task.cancel()
            await asyncio.wait({task}, timeout=5)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=6)

    def close(self) -> None:
        """Stop the loop thread (idempotent)."""
        with self._lock:
            loop, self._loop = self._loop, None
            thread, self._thread = self._thread, None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
