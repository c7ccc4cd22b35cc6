"""Schedules: mowers' weekly calendars, the scheduler that runs them, parks and sites'
restrictions (``docs/fleet.md``, "Schedules")."""
