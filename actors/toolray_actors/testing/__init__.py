"""Test kit for farms: a Ray cluster owned by a helper process (``cluster_host``).

``python -m toolray_actors.testing.cluster_host`` starts a ``ray.cluster_utils.Cluster``
head, prints ``ADDRESS <gcs address>``, then adds and removes worker nodes on command — the
multi-driver tests and the chaos campaign (``benchmarks/chaos.py``) drive it.
"""

from __future__ import annotations

__all__: tuple[str, ...] = ()
