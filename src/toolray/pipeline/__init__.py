"""The per-call pipeline: the call record and its stages (prepare, dispatch, complete).

Internal: runtimes use it through ``toolray.lowlevel``.
"""
