"""The PostgreSQL deliveries against the delivery contract."""

from __future__ import annotations

from tests.unit.notifications.delivery.delivery_contract import DeliveryContract


class TestPostgresDeliveries(DeliveryContract):
    pass
