"""The Device-Gateway: the only service that talks to mowers (ADR 0013)."""
