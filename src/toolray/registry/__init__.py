"""The tool registry: layers, visibility, state, the read and write sides, admission.

Internal: the public names (``ToolRegistry``, ``ScopedTools``, …) are re-exported by
``toolray``.
"""
