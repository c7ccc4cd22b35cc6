"""Ingest: mower states and link events through the rules into watches and events.

- ``actor``: one ``WatchActor`` per mower, holding its watch and running the rules.
- ``states``: the state consumer's micro-batches through the actors, one commit each;
  ``statebatch``: that commit's transaction.
- ``links``: ``mower.connected``/``disconnected`` events, in micro-batches.
- ``offline``: the offline scan, the silence timer on every replica; ``consuming``:
  since when this replica consumes, where silence starts to count.
- ``plan``: the rules folded over a batch (pure).
"""
