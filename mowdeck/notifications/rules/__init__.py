"""Rules: what ADR 0022 decides about one mower, pure (no I/O, no clock of its own).

- ``kinds``: the kinds, their severities and defaults; ``events``: what a rule decides.
- ``watch``: ``MowerWatch``, what the rules remember per mower between its states.
- ``evaluate``: the rules over states, link events and silence, and their ``Thresholds``;
  ``emitter``: the cooldown they apply.
- ``quiet``: quiet hours in a user's time zone.
- ``templates`` with ``messages/``: the messages, rendered per reader.
"""
