"""Schedules: weekly calendars per mower, the scheduler, parks and sites' restrictions.

The pure slot logic (``slots``, ``plan``), the ports and their adapters, the scheduler
every Fleet replica runs, and the API (``docs/fleet.md``, "Schedules").
"""
