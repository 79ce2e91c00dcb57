"""The scheduler: the pure planner and the one engine that runs calls by its plan.

Internal: the planner's functions are public in ``toolray.lowlevel``.
"""
