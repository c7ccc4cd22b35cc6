"""The simulator's mowers through Notifications' geofence rules: mowing inside its work
area tells nothing, ``escape`` is told as ``left_area`` and ``theft`` as
``theft_suspected``, each once, and the alarms clear when the mower is home again."""

from __future__ import annotations

import uuid
from datetime import timedelta

from contracts.v1 import MowerRegistration, SiteAreas, StartMow
from contracts.v1.fleet import Connection
from mowdeck.notifications.ingest.geofences import Geofences
from mowdeck.notifications.rules.evaluate import Thresholds, evaluate_state
from mowdeck.notifications.rules.events import AlarmChange, RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch
from simulator import EscapeFault, Params, TheftFault, VirtualMower
from simulator.physics import Body
from tests.unit.notifications.samples import T0
from tests.unit.simulator.test_areas import AREAS, GARDEN

SITE = uuid.UUID("00000000-0000-4000-8000-000000000051")


class Run:
    """A simulated mower, its states through the rules once a second."""

    def __init__(self) -> None:
        self.mower = VirtualMower(
            mower_id=uuid.uuid4(), account_id=uuid.uuid4(), name="m", garden=GARDEN,
            params=Params(), body=Body(), seed=3, now=0.0,
        )  # fmt: skip
        self.mower.areas = AREAS
        m = self.mower
        self.fences = Geofences()
        self.fences.apply_areas(
            SiteAreas(site_id=SITE, account_id=m.account_id, version=1, areas=list(AREAS))
        )
        self.fences.apply_mower(
            MowerRegistration(mower_id=m.mower_id, account_id=m.account_id, name="m",
                              connection=Connection(kind="simulator"), site_id=SITE)
        )  # fmt: skip
        self.watch: MowerWatch | None = None
        self.events: list[RuleEvent] = []
        self.alarms: list[AlarmChange] = []
        self.t = 0

    def until(self, seconds: int) -> None:
        """States every second up to ``seconds``."""
        while self.t < seconds:
            self.t += 1
            self.mower.advance(float(self.t))
            state = self.mower.state(T0 + timedelta(seconds=self.t))
            at = state.observed_at
            place = self.fences.placement(state)
            outcome = evaluate_state(self.watch, state, at, Thresholds(), place)
            self.watch = outcome.watch
            self.events += outcome.events
            self.alarms += outcome.alarms

    def activity(self) -> str:
        """The simulated mower's activity now."""
        return self.mower.body.activity

    def told(self) -> list[str]:
        return [e.kind for e in self.events if e.kind in ("left_area", "theft_suspected")]


def test_mowing_an_area_then_escaping_then_home_again() -> None:
    run = Run()
    assert run.mower.execute(StartMow(work_area="front"), 0.0) is None
    run.until(600)  # leaves the dock (outside the area, but driving there), mows
    assert run.activity() == "mowing"
    assert run.told() == []
    run.mower.inject(EscapeFault(), float(run.t), 0.0)
    run.until(700)
    assert run.told() == ["left_area"]
    run.mower.clear_faults(float(run.t))
    run.until(1000)
    assert run.activity() in ("docked", "charging")
    assert [(a.change, a.condition) for a in run.alarms] == [
        ("raised", "left_area"),
        ("cleared", "left_area"),
    ]
    assert run.told() == ["left_area"]


def test_theft_is_suspected_once() -> None:
    run = Run()
    run.mower.execute(StartMow(work_area="front"), 0.0)
    run.until(300)
    run.mower.inject(TheftFault(speed_mps=8.0), float(run.t), 0.0)
    run.until(330)
    assert "theft_suspected" in run.told()
    assert run.told().count("theft_suspected") == 1
