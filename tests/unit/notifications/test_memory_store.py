"""The in-memory store against the store contract."""

from __future__ import annotations

import pytest

from mowdeck.notifications.inbox.memory import InMemoryNotificationStore
from tests.unit.notifications.delivery.delivery_contract import DeliveryContract
from tests.unit.notifications.store_contract import StoreContract


@pytest.fixture
def store() -> InMemoryNotificationStore:
    return InMemoryNotificationStore()


class TestInMemoryStore(StoreContract):
    pass


class TestInMemoryDeliveries(DeliveryContract):
    pass
