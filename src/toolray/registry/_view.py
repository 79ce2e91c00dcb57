"""The visibility rule (R-VIS, R-COND-01), as pure functions over layers.

For scope S with chain ``[A0 (farthest), …, S]``:

1. overlay the global tools and every ancestor layer (not S's own), farthest first; a nearer
   entry replaces a name in place (it keeps the position);
2. keep an inherited name only if every restriction of every layer on the chain, S's own
   included, admits it;
3. apply S's own registrations last: never filtered; a shadow keeps the position of the name
   it replaces, or goes to the end if that name was filtered (R-VIS-07).

``include`` selects which registrations take part (all of them for inspection, the
unconditional ones for execution without a step set, a step's admitted ones with a set), so
an excluded conditional registration never shadows anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._layers import Entry, Layer

__all__ = ("build_view", "restrictable_names")

Include = Callable[[Entry], bool]


def build_view(
    global_layer: Layer,
    ancestors: Sequence[Layer | None],
    own: Layer | None,
    include: Include,
) -> dict[str, Entry]:
    """The visible entries of one scope, in view order (R-VIS-06)."""
    inherited: dict[str, Entry] = {}
    for layer in (global_layer, *ancestors):
        if layer is not None:
            inherited.update((n, e) for n, e in layer.tools.items() if include(e))
    restricting = [layer for layer in (*ancestors, own) if layer is not None and layer.restrictions]
    if restricting:
        view = {
            name: entry
            for name, entry in inherited.items()
            if all(layer.admits(name) for layer in restricting)
        }
    else:
        view = inherited
    if own is not None:
        for name, entry in own.tools.items():
            if include(entry):
                view[name] = entry
    return view


def restrictable_names(global_layer: Layer, ancestors: Sequence[Layer | None]) -> set[str]:
    """Names a scope inherits before restrictions: globals plus its ancestors' tools."""
    names = set(global_layer.tools)
    for layer in ancestors:
        if layer is not None:
            names.update(layer.tools)
    return names
