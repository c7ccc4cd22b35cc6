"""The chaos run: the production topology as processes, load, faults, and an invariant check.

``python -m tests.chaos.run --minutes N [--seed S]``; see docs/reliability.md.
"""
