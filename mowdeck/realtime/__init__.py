"""Realtime: live states, command outcomes, links and notifications pushed to clients."""
