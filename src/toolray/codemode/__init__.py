"""Code Mode (programmatic tool calling) in the core: the reserved ``run_code`` tool.

Internal: the public names are re-exported by ``toolray``; the runtime that runs a
program is ``toolray.code``.
"""
