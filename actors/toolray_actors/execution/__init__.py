"""Execution: the executor actor, pools, workers, coalescing and call processes."""
