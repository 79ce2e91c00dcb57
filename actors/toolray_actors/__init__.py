"""toolray_actors: the Ray layer of toolray (registry actor, executor actors, worker pool)."""

from __future__ import annotations

__all__ = ()
