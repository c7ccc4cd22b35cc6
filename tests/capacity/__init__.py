"""The capacity model: how many shards, replicas, NATS nodes, cores and how much
PostgreSQL a fleet of a given size needs, from per-message costs measured on this
machine (``costs.json``, written by ``python -m tests.capacity measure``), and its check
against benchmarks (``python -m tests.capacity check``). ``docs/capacity.md`` explains it.
"""
