"""Mowdeck: a backend for fleets of robotic lawn mowers: its services, their kit and the CLI."""
