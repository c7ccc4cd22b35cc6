"""The soak: everything under a realistic load for a long time, and what grew.

``python -m tests.soak --seconds 1800`` (``just soak``) runs ``mowdeck demo``'s services in a
process of their own (``target.py``) with 1,000 simulated mowers, drives commands through
Fleet's API (``load.py``), and samples every process (``procs.py``) and the streams' and
tables' sizes; ``growth.py`` decides what grew. ``--gate`` fails the run when open files,
asyncio tasks or threads grow past their bound after the warm-up (the CI version).
"""
