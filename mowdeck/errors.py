"""The root of Mowdeck's own exceptions."""


class MowdeckError(Exception):
    """Base of every error Mowdeck raises on purpose."""
