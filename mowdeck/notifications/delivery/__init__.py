"""Delivery: channel targets and what is sent to them (ADR 0022).

- ``targets``: the target documents and the policy that keeps them off internal
  addresses; ``routes``: their HTTP API; ``limits``: new targets per user.
- ``worker``: the delivery worker, which claims due deliveries, sends them through the
  channels and records the results; ``plan``: its pure decisions (backoff, outcomes,
  when a quiet-hours summary is due).
- ``channels/``: the channel port and the shipped channels (webpush, ntfy, log).
- ``settings``, ``metrics``: the delivery's own.
"""
