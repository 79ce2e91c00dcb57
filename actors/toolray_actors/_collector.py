"""The cyclic garbage collector's pace in toolray's own actors.

An executor shard serving 100,000 scopes holds a large live heap; at CPython's default
pace (a young collection every 700 net allocations) objects that live as long as a batch
are promoted and full collections come often: about 30 % of a busy shard's CPU in the
collector. Each actor freezes what it imported (modules, classes: never garbage) and
collects young objects every :data:`THRESHOLDS` allocations instead: 100,000 scopes'
batches finish about 10 % sooner, and garbage cycles still go within a few thousand
allocations. User code running in a worker with ``isolation="shared"`` shares the
worker's pace; with ``"call"`` it runs in a template's fork, which keeps Python's own.

The same start also starts the actor's heap trimming (``_heap``): what the collector frees
goes back to the system every half minute instead of staying in glibc's arenas.
"""

from __future__ import annotations

import gc

from toolray_actors._heap import start_trimming
from toolray_actors._remote import actor_id

__all__ = ("THRESHOLDS", "pace_collector")

THRESHOLDS = (20_000, 20, 10)
"""``gc.set_threshold`` of toolray's actors (Python's default: 700, 10, 10)."""


def pace_collector() -> bool:
    """In an actor's process: freeze what is loaded now, then collect at :data:`THRESHOLDS`.

    It also starts the heap trimming (freed heap back to the system every
    :data:`~toolray_actors._heap.TRIM_EVERY_S` seconds). Called as an actor starts;
    anywhere else (a driver, a test building the class in process) it changes nothing.
    Whether it paced the collector.
    """
    if not actor_id():
        return False
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    start_trimming()
    return True
