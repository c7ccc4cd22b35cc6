"""Alarms: a mower's condition from when a rule tells it until it ends, acknowledged and
assigned by people (``model``, ``ports``, the adapters, ``routes``)."""
