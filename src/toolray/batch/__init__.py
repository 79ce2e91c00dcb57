"""Batches: the batch values, one batch run, and the in-process ``BatchExecutor``.

Internal: the public names are re-exported by ``toolray``.
"""
