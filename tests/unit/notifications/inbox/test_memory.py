"""The in-memory inbox against the inbox's and the preferences' contracts."""

from __future__ import annotations

from tests.unit.notifications.inbox.inbox_contract import InboxContract
from tests.unit.notifications.inbox.preferences_contract import PreferencesContract


class TestInMemoryInbox(InboxContract):
    pass


class TestInMemoryPreferences(PreferencesContract):
    pass
