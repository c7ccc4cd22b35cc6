"""Which subscribers want an event: scope, kinds and their defaults, the account."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.recipients import Subscriber, recipients
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.kinds import SEVERITY, Kind
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, OTHER_MOWER, at


def event(kind: Kind = "battery_low", mower_id: Any = MOWER) -> RuleEvent:
    """An event of ``kind`` about ``mower_id`` in ``ACCOUNT``."""
    return RuleEvent(
        kind=kind,
        mower_id=mower_id,
        account_id=ACCOUNT,
        severity=SEVERITY[kind],
        dedupe_key=f"{kind}:{mower_id}:x",
        message_key=kind,
        occurred_at=at(0),
    )


def subscriber(account: Any = ACCOUNT, **prefs: Any) -> Subscriber:
    """A subscriber whose preferences are ``prefs``."""
    return Subscriber(
        user_id="u", account_id=account, preferences=msgspec.convert(prefs, Preferences)
    )


CASES = [
    (subscriber(scope="none"), event(), False),
    (subscriber(scope="all"), event(), True),
    (subscriber(scope="selected", mowers=[MOWER]), event(), True),
    (subscriber(scope="selected", mowers=[OTHER_MOWER]), event(), False),
    (subscriber(scope="selected"), event(), False),
    (subscriber(scope="all"), event("job_started"), False),
    (subscriber(scope="all", kinds={"job_started": True}), event("job_started"), True),
    (subscriber(scope="all", kinds={"battery_low": False}), event(), False),
    (subscriber(scope="all", kinds={"battery_low": False}), event("mower_stuck"), True),
    (subscriber(OTHER_ACCOUNT, scope="all"), event(), False),
]
IDS = [
    "scope-none",
    "scope-all",
    "selected-this-mower",
    "selected-another-mower",
    "selected-nothing",
    "job-started-off-by-default",
    "job-started-enabled",
    "kind-disabled",
    "another-kind-still-on",
    "another-account",
]


@pytest.mark.parametrize(("sub", "ev", "wanted"), CASES, ids=IDS)
def test_recipients(sub: Subscriber, ev: RuleEvent, wanted: bool) -> None:
    assert recipients([sub], ev) == ([sub] if wanted else [])


def test_recipients_keep_the_order_given() -> None:
    subs = [
        Subscriber(user_id=name, account_id=ACCOUNT, preferences=Preferences(scope="all"))
        for name in ("c", "a", "b")
    ]
    assert [s.user_id for s in recipients(subs, event())] == ["c", "a", "b"]
