"""Deny-list tests reuse Fleet's database, authorizer and HTTP fixtures."""

from tests.integration.fleet.conftest import authorizer, fleet_db, http, pool

__all__ = ["authorizer", "fleet_db", "http", "pool"]
