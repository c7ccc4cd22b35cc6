"""Errors as problems: what a caller can do about each one."""

from __future__ import annotations

import pytest

from mowdeck.authz import AuthzUnavailableError
from mowdeck.fleet.errors import FleetError
from mowdeck.fleet.routes import problem_of
from mowdeck.kit.bus import BusError, ExpiredCommandError


@pytest.mark.parametrize(
    ("err", "status", "field", "retry_after"),
    [
        (ExpiredCommandError("command c expired at t"), 422, "ttl_s", None),
        (AuthzUnavailableError("tuple store: gone"), 503, None, "1"),
        (BusError("no ack"), 503, None, "1"),
    ],
    ids=["expired-command", "authorization-unavailable", "bus-unavailable"],
)
def test_a_problem_tells_whether_a_retry_can_help(
    err: FleetError | BusError | AuthzUnavailableError,
    status: int,
    field: str | None,
    retry_after: str | None,
) -> None:
    problem = problem_of(err)
    assert problem.status == status
    assert problem.extra.get("field") == field
    assert problem.headers.get("Retry-After") == retry_after
    if field is not None:
        assert (problem.detail or "").startswith(f"`{field}`")
