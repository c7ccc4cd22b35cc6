"""Where ``mowdeck/demo.py`` imports ``Preferences`` from: the document is in
``inbox/preferences.py``. This goes once the demo imports it from there."""

from mowdeck.notifications.inbox.preferences import Preferences

__all__ = ["Preferences"]
