"""The stores the notifications unit tests share: every part's, in memory."""

from __future__ import annotations

import pytest

from mowdeck.notifications.infra import Stores


@pytest.fixture
def stores() -> Stores:
    """The in-memory stores, wired as the service wires PostgreSQL's."""
    return Stores.in_memory()
