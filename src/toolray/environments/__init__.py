"""Environments: the world a scope's tools act on, one instance per (scope, name).

The package imports nothing; its public names are re-exported by ``toolray`` (the
definition, the handle, the status) and ``toolray.lowlevel`` (the backend seam the Ray layer
implements).
"""
