"""Where ``mowdeck/demo.py`` imports ``LogTarget`` from: the targets are in
``delivery/targets.py``. This goes once the demo imports them from there."""

from mowdeck.notifications.delivery.targets import LogTarget

__all__ = ["LogTarget"]
