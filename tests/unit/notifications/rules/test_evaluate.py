"""The notification rules, as scripts of states, link events and timer runs at fixed times.

A script's result is written ``message_key@seconds``: what was sent, and at which second
after ``T0`` (the instant the rule decided it).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from mowdeck.notifications.rules.evaluate import (
    MESSAGE_KEYS,
    Thresholds,
    evaluate_silence,
    evaluate_state,
    silence_due,
)
from mowdeck.notifications.rules.watch import MowerWatch, decode_watch, encode_watch
from tests.unit.notifications.rules.test_geofence import CASES as GEOFENCE_CASES
from tests.unit.notifications.samples import (
    ACCOUNT,
    METRE,
    MOWER,
    OTHER_ACCOUNT,
    THRESHOLDS,
    L,
    Q,
    S,
    Step,
    at,
    run,
    state,
)


def mow(seconds: float, **fields: Any) -> Step:
    """A mowing state, a metre further north every second (never a standstill)."""
    return S(seconds, activity="mowing", lat=52.5 + seconds * METRE, **fields)


def still(seconds: float, **fields: Any) -> Step:
    """A mowing state on the same spot."""
    return S(seconds, activity="mowing", **fields)


DOCKED: dict[str, Any] = {"activity": "docked", "battery": 100}


def charging(battery: int) -> dict[str, Any]:
    """The fields of a mower charging at ``battery``."""
    return {"activity": "charging", "charging": True, "battery": battery}


# -- what each script sends --------------------------------------------------------

CASES: list[tuple[str, list[Step], list[str]]] = [
    # The first state.
    ("first-state-mowing-is-silent", [mow(0)], []),
    ("first-state-error-is-silent", [S(0, activity="error", error_code="E1")], []),
    ("first-state-low-battery-is-silent", [S(0, battery=5), S(10, battery=4)], []),
    ("first-state-offline-then-back-is-silent", [S(0, activity="offline"), S(10)], []),
    # job_started and mowing_finished.
    (
        "job-starts-when-mowing-begins",
        [S(0, **DOCKED), S(10, activity="leaving"), mow(20), mow(30)],
        ["job_started@20"],
    ),
    (
        "job-starts-once-through-a-pause",
        [
            S(0, **DOCKED),
            mow(10),
            S(20, activity="paused"),
            mow(30),
            S(40, activity="stopped"),
            mow(50),
        ],
        ["job_started@10"],
    ),
    (
        "job-finishes-docked",
        [S(0, **DOCKED), mow(10), S(200, activity="returning"), S(260, **DOCKED)],
        ["job_started@10", "mowing_finished@260"],
    ),
    (
        "job-finishes-charging-above-the-recharge-level",
        [S(0, **DOCKED), mow(10), S(400, **charging(60))],
        ["job_started@10", "mowing_finished@400"],
    ),
    (
        "job-finishes-docked-without-charging-even-when-low",
        [S(0, **DOCKED), mow(10), S(400, activity="docked", battery=10)],
        ["job_started@10", "mowing_finished@400", "battery_low@400"],
    ),
    (
        "job-shorter-than-the-minimum-is-silent",
        [S(0, **DOCKED), mow(10), S(129, **DOCKED)],
        ["job_started@10"],
    ),
    (
        "job-of-exactly-the-minimum-finishes",
        [S(0, **DOCKED), mow(10), S(130, **DOCKED)],
        ["job_started@10", "mowing_finished@130"],
    ),
    (
        "job-abandoned-idle-is-silent",
        [S(0, **DOCKED), mow(10), S(500, activity="idle"), S(600, **DOCKED)],
        ["job_started@10"],
    ),
    # The mid-job recharge.
    (
        "mid-job-recharge-is-not-finished",
        [
            S(0, **DOCKED),
            mow(10),
            S(1000, activity="returning", battery=15),
            S(1100, **charging(14)),
            S(2000, **charging(60)),
            S(3000, activity="leaving", battery=95),
            mow(3100, battery=94),
            S(4000, activity="returning", battery=50),
            S(4100, **charging(48)),
        ],
        ["job_started@10", "battery_low@1000", "mowing_finished@4100"],
    ),
    (
        "mid-job-recharge-docked-with-the-charging-flag",
        [
            S(0, **DOCKED),
            mow(10),
            S(1100, activity="docked", charging=True, battery=14),
            mow(3100, battery=94),
        ],
        ["job_started@10"],
    ),
    (
        "recharging-job-finishes-when-it-never-goes-out-again",
        [S(0, **DOCKED), mow(10), S(1000, **charging(14)), S(8200, **DOCKED)],
        ["job_started@10", "mowing_finished@8200"],
    ),
    (
        "recharging-job-just-under-the-bound-waits",
        [S(0, **DOCKED), mow(10), S(1000, **charging(14)), S(8199, **DOCKED)],
        ["job_started@10"],
    ),
    # mower_stuck by error.
    (
        "error-is-told-once-per-code",
        [
            mow(0),
            S(100, activity="error", error_code="E1"),
            S(110, activity="error", error_code="E1"),
        ],
        ["mower_stuck.error@100"],
    ),
    (
        "error-that-clears-and-returns-is-told-again",
        [
            mow(0),
            S(100, activity="error", error_code="E1"),
            S(150),
            S(500, activity="error", error_code="E1"),
        ],
        ["mower_stuck.error@100", "mower_stuck.error@500"],
    ),
    (
        "error-with-a-new-code-within-the-cooldown-is-held-then-sent",
        [
            mow(0),
            S(100, activity="error", error_code="E1"),
            S(200, activity="error", error_code="E2"),
            S(399, activity="error", error_code="E2"),
            S(400, activity="error", error_code="E2"),
        ],
        ["mower_stuck.error@100", "mower_stuck.error@400"],
    ),
    (
        "held-error-that-clears-is-dropped",
        [
            mow(0),
            S(100, activity="error", error_code="E1"),
            S(150),
            S(200, activity="error", error_code="E1"),
            S(250),
            S(500),
        ],
        ["mower_stuck.error@100"],
    ),
    # mower_stuck by standstill.
    (
        "standstill-while-mowing",
        [still(0), still(100), still(200), still(300)],
        ["mower_stuck.standstill@300"],
    ),
    ("standstill-just-under-the-time", [still(0), still(299)], []),
    (
        "standstill-is-told-once",
        [still(0), still(300), still(400), still(700)],
        ["mower_stuck.standstill@300"],
    ),
    (
        "small-moves-do-not-reset-the-standstill",
        [still(0), still(150, lat=52.5 + 0.3 * METRE), still(300, lat=52.5 + 0.4 * METRE)],
        ["mower_stuck.standstill@300"],
    ),
    (
        "a-move-of-the-distance-resets-the-standstill",
        [still(0), still(150, lat=52.5 + 0.6 * METRE), still(300, lat=52.5 + 0.6 * METRE)],
        [],
    ),
    (
        "a-pause-resets-the-standstill",
        [still(0), S(200, activity="paused"), still(250), still(500)],
        [],
    ),
    (
        "mowing-without-position-keeps-the-anchor",
        [still(0), still(200, lat=None), still(300)],
        ["mower_stuck.standstill@300"],
    ),
    # battery_low and its hysteresis.
    ("battery-below-the-level", [S(0, battery=25), S(10, battery=19)], ["battery_low@10"]),
    ("battery-at-the-level-is-not-below", [S(0, battery=25), S(10, battery=20)], []),
    ("battery-low-while-charging-is-silent", [S(0, battery=25), S(10, **charging(15))], []),
    (
        "battery-low-again-only-after-re-arming",
        [S(0, battery=25), S(10, battery=19), S(400, battery=29), S(800, battery=18)],
        ["battery_low@10"],
    ),
    (
        "battery-re-armed-at-the-rearm-level",
        [S(0, battery=25), S(10, battery=19), S(400, battery=30), S(800, battery=18)],
        ["battery_low@10", "battery_low@800"],
    ),
    (
        "battery-low-from-the-first-state-arms-after-charging",
        [S(0, battery=5), S(100, **charging(40)), S(200, battery=35), S(300, battery=19)],
        ["battery_low@300"],
    ),
    (
        "battery-low-within-the-cooldown-is-held",
        [
            S(0, battery=25),
            S(10, battery=19),
            S(100, **charging(35)),
            S(200, battery=19),
            S(310, battery=18),
        ],
        ["battery_low@10", "battery_low@310"],
    ),
    # mower_offline and mower_online.
    ("offline-state", [S(0), S(10, activity="offline")], ["mower_offline.state@10"]),
    (
        "online-after-a-told-offline",
        [S(0), S(10, activity="offline"), S(20, activity="offline"), S(30)],
        ["mower_offline.state@10", "mower_online@30"],
    ),
    ("silence-just-under-the-limit", [S(0), Q(119)], []),
    ("silence-at-the-limit", [S(0), Q(120), Q(130)], ["mower_offline.silence@120"]),
    (
        "silence-counts-from-the-service-receiving-the-state",
        [S(0, now=60), Q(179), Q(180)],
        ["mower_offline.silence@180"],
    ),
    (
        "heartbeats-with-an-old-observed-at-are-not-contact",
        [S(0), Q(120), S(0, now=130), S(0, now=140), Q(150), S(160)],
        ["mower_offline.silence@120", "mower_online@160"],
    ),
    (
        "an-older-state-is-not-contact",
        [S(0), S(100), Q(220), S(50, now=230)],
        ["mower_offline.silence@220"],
    ),
    ("disconnect-within-the-grace", [S(0), L(5, "disconnected"), Q(34)], []),
    (
        "disconnect-without-reconnect",
        [S(0), L(5, "disconnected"), Q(35)],
        ["mower_offline.link@35"],
    ),
    (
        "disconnect-then-reconnect-within-the-grace",
        [S(0), L(5, "disconnected"), L(20, "connected"), Q(40), Q(119)],
        [],
    ),
    (
        "disconnect-then-a-newer-state-within-the-grace",
        [S(0), L(5, "disconnected"), S(20), Q(40), Q(139)],
        [],
    ),
    (
        "a-reconnect-is-no-contact-only-a-newer-state-is",
        [S(0), L(5, "disconnected"), Q(35), L(60, "connected"), Q(200), S(210)],
        ["mower_offline.link@35", "mower_online@210"],
    ),
    (
        "a-link-event-older-than-the-last-state-is-ignored",
        [S(0), S(50), L(40, "disconnected"), Q(80), Q(169)],
        [],
    ),
    (
        "a-link-event-older-than-the-last-link-event-is-ignored",
        [S(0), L(60, "disconnected"), L(50, "connected"), Q(89), Q(90)],
        ["mower_offline.link@90"],
    ),
    # The restart rule.
    (
        "a-restart-counts-silence-from-consuming-again",
        [S(0), Q(1000, since=990), Q(1109, since=990), Q(1110, since=990)],
        ["mower_offline.silence@1110"],
    ),
    (
        "a-restart-counts-the-grace-from-consuming-again",
        [S(0), L(5, "disconnected"), Q(1000, since=990), Q(1019, since=990), Q(1020, since=990)],
        ["mower_offline.link@1020"],
    ),
    (
        "a-restart-with-the-states-replayed-sends-nothing",
        [S(0, now=1000), S(10, now=1001), Q(1002, since=995), Q(1100, since=995)],
        [],
    ),
    # The cooldown.
    (
        "a-job-start-within-the-cooldown-is-dropped",
        [S(0, **DOCKED), mow(10), S(50, **DOCKED), mow(100), S(900, **DOCKED)],
        ["job_started@10", "mowing_finished@900"],
    ),
    (
        "a-flapping-mower-gets-the-offline-when-the-cooldown-ends",
        [S(0), S(10, activity="offline"), S(20), S(30, activity="offline"), Q(309), Q(310)],
        ["mower_offline.state@10", "mower_online@20", "mower_offline.state@310"],
    ),
    (
        "a-held-offline-is-dropped-when-the-mower-is-back",
        [S(0), S(10, activity="offline"), S(20), S(30, activity="offline"), S(40), Q(159)],
        ["mower_offline.state@10", "mower_online@20"],
    ),
    (
        "a-held-online-is-sent-when-the-cooldown-ends",
        [
            S(0),
            S(10, activity="offline"),
            S(20),
            S(310, activity="offline"),
            S(315),
            Q(319),
            Q(320),
        ],
        [
            "mower_offline.state@10",
            "mower_online@20",
            "mower_offline.state@310",
            "mower_online@320",
        ],
    ),
    (
        "losing-contact-while-the-online-is-held-tells-nothing-new",
        [
            S(0),
            S(10, activity="offline"),
            S(20),
            S(310, activity="offline"),
            S(315),
            S(318, activity="offline"),
            Q(400),
            S(500),
        ],
        [
            "mower_offline.state@10",
            "mower_online@20",
            "mower_offline.state@310",
            "mower_online@500",
        ],
    ),
    # Stale and foreign states.
    ("an-older-state-advances-nothing", [S(200), S(100, battery=5)], []),
    ("a-repeated-state-advances-nothing", [S(0, battery=25), S(0, battery=5)], []),
    (
        "a-state-of-another-account-starts-afresh",
        [S(0), S(10, account_id=OTHER_ACCOUNT, activity="error", error_code="E1")],
        [],
    ),
]


@pytest.mark.parametrize(("steps", "sent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_script_sends(steps: list[Step], sent: list[str]) -> None:
    assert run(steps).sent == sent


# -- what each script suppresses ---------------------------------------------------

SUPPRESSED: list[tuple[str, list[Step], list[str]]] = [
    (
        "first-state-reports-what-it-shows",
        [S(0, activity="mowing", battery=10)],
        ["job_started:first_state@0", "battery_low:first_state@0"],
    ),
    (
        "first-state-error-and-offline",
        [S(0, activity="error", error_code="E1")],
        ["mower_stuck:first_state@0"],
    ),
    ("first-state-offline", [S(0, activity="offline")], ["mower_offline:first_state@0"]),
    ("first-state-of-nothing-special", [S(0)], []),
    (
        "a-dropped-job-start",
        [S(0, **DOCKED), mow(10), S(50, **DOCKED), mow(100)],
        ["job_started:cooldown@100"],
    ),
    (
        "a-held-error-is-reported-once",
        [
            mow(0),
            S(100, activity="error", error_code="E1"),
            S(150),
            S(200, activity="error", error_code="E1"),
            S(210, activity="error", error_code="E1"),
            S(220, activity="error", error_code="E1"),
            S(400, activity="error", error_code="E1"),
        ],
        ["job_started:first_state@0", "mower_stuck:cooldown@200"],
    ),
    (
        "a-held-offline-is-reported-once-however-often-the-timer-runs",
        [S(0), S(10, activity="offline"), S(20), S(30, activity="offline"), Q(100), Q(200)],
        ["mower_offline:cooldown@30"],
    ),
]


@pytest.mark.parametrize(
    ("steps", "held"), [c[1:] for c in SUPPRESSED], ids=[c[0] for c in SUPPRESSED]
)
def test_script_suppresses(steps: list[Step], held: list[str]) -> None:
    assert run(steps).held == held


# -- what the events carry -----------------------------------------------------------


def test_events_carry_kind_severity_account_and_occurrence() -> None:
    trace = run(
        [
            S(0, **DOCKED),
            mow(10),
            S(1000, activity="error", error_code="blade"),
            S(1010, activity="returning", battery=19),
            S(1100, activity="docked", battery=19),
            S(1110, activity="offline", battery=19),
        ]
    )
    by_kind = {e.kind: e for e in trace.events}
    assert [(e.kind, e.severity) for e in trace.events] == [
        ("job_started", "info"),
        ("mower_stuck", "critical"),
        ("battery_low", "warning"),
        ("mowing_finished", "info"),
        ("mower_offline", "warning"),
    ]
    assert {e.account_id for e in trace.events} == {ACCOUNT}
    assert {e.mower_id for e in trace.events} == {MOWER}
    started = at(10).isoformat()
    assert by_kind["job_started"].dedupe_key == f"job_started:{MOWER}:{started}"
    assert by_kind["job_started"].params == {"started_at": started}
    assert by_kind["mowing_finished"].dedupe_key == f"mowing_finished:{MOWER}:{started}"
    assert by_kind["mowing_finished"].params == {"duration_seconds": 1090, "started_at": started}
    stuck = by_kind["mower_stuck"]
    assert stuck.dedupe_key == f"mower_stuck:{MOWER}:error:blade:{at(1000).isoformat()}"
    assert stuck.params == {"error_code": "blade"}
    assert stuck.message_key == "mower_stuck.error"
    assert by_kind["battery_low"].params == {"battery": 19}
    offline = by_kind["mower_offline"]
    assert offline.dedupe_key == f"mower_offline:{MOWER}:{at(1110).isoformat()}"
    assert offline.params == {"since": at(1110).isoformat()}
    assert offline.occurred_at == at(1110)


def test_an_error_without_a_code_is_unknown() -> None:
    [event] = run([S(0), S(10, activity="error")]).events
    assert event.params == {"error_code": "unknown"}


def test_the_standstill_names_how_long() -> None:
    [event] = run([still(0), still(310)]).events
    assert event.params == {"stuck_seconds": 310}
    assert event.dedupe_key == f"mower_stuck:{MOWER}:standstill:{at(0).isoformat()}"


def test_the_online_names_how_long_the_mower_was_offline() -> None:
    trace = run([S(0), Q(120), S(500, now=500)])
    offline, online = trace.events
    assert offline.params == {"since": at(0).isoformat()}
    assert online.params == {"offline_seconds": 500}
    assert online.dedupe_key == f"mower_online:{MOWER}:{at(0).isoformat()}"


def test_a_held_online_names_the_time_contact_came_back() -> None:
    trace = run([S(0), S(10, activity="offline"), S(20), S(310, activity="offline"), S(315)])
    trace = run([Q(330)], watch=trace.watch)
    [online] = trace.events
    assert online.occurred_at == at(330)
    assert online.params == {"offline_seconds": 5}


def test_the_duration_of_a_recharged_job_runs_to_its_last_docking() -> None:
    trace = run([S(0, **DOCKED), mow(10), S(1000, **charging(14)), S(9000, **DOCKED)])
    assert trace.events[-1].params["duration_seconds"] == 990


def test_thresholds_are_parameters() -> None:
    strict = Thresholds(job_min=timedelta(seconds=10), cooldown=timedelta(0))
    trace = run([S(0, **DOCKED), mow(10), S(30, **DOCKED), mow(40), S(60, **DOCKED)], strict)
    assert trace.sent == [
        "job_started@10",
        "mowing_finished@30",
        "job_started@40",
        "mowing_finished@60",
    ]


# -- the watch -------------------------------------------------------------------------


def test_a_stale_state_returns_the_watch_unchanged() -> None:
    watch = run([S(100)]).watch
    outcome = evaluate_state(watch, state(50, battery=1), at(200), THRESHOLDS)
    assert outcome.watch is watch
    assert outcome.events == []
    assert outcome.ignored == "not_newer"
    assert evaluate_state(watch, state(101), at(200), THRESHOLDS).ignored is None


def test_a_state_from_the_future_is_ignored() -> None:
    # A state five minutes and a second ahead of the service's clock would hold every
    # later state of the mower off as "not newer": it is ignored, first state or not.
    ahead = state(301, activity="error", error_code="E1")
    first = evaluate_state(None, ahead, at(0), THRESHOLDS)
    assert (first.watch, first.ignored, first.suppressed) == (None, "from_the_future", [])
    watch = run([S(0)]).watch
    later = evaluate_state(watch, ahead, at(0), THRESHOLDS)
    assert (later.watch, later.ignored, later.events) == (watch, "from_the_future", [])
    assert evaluate_state(watch, state(300), at(0), THRESHOLDS).ignored is None


def test_a_quiet_timer_run_returns_the_watch_unchanged() -> None:
    watch = run([S(0)]).watch
    assert watch is not None
    assert evaluate_silence(watch, at(60), at(-10), THRESHOLDS).watch is watch


def test_the_watch_round_trips_as_json() -> None:
    watch = run(
        [
            S(0, **DOCKED),
            mow(10),
            S(20, activity="error", error_code="E"),
            L(30, "disconnected"),
            Q(200),
        ]
    ).watch
    assert watch is not None
    assert watch.last_sent
    assert decode_watch(encode_watch(watch)) == watch


def test_a_watch_of_an_older_release_decodes_and_unknown_fields_are_ignored() -> None:
    data = {
        "mower_id": str(MOWER),
        "account_id": str(ACCOUNT),
        "observed_at": at(0).isoformat(),
        "contact_at": at(0).isoformat(),
        "activity": "idle",
        "battery": 50,
        "some_future_field": {"x": 1},
        "last_sent": {"some_future_kind": at(0).isoformat()},
    }
    watch = decode_watch(msgspec.json.encode(data))
    assert watch.job is None
    assert watch.battery_armed_at is None
    assert watch.held == {}
    assert run([S(10, battery=19)], watch=watch).sent == []
    assert run([S(10, battery=35), S(20, battery=19)], watch=watch).sent == ["battery_low@20"]


# -- when the timer looks next -------------------------------------------------------


def _watch(steps: list[Step]) -> MowerWatch:
    watch = run(steps).watch
    assert watch is not None
    return watch


DUE: list[tuple[str, list[Step], float | None, float | None]] = [
    ("after-a-state", [S(0, now=5)], None, 125),
    ("after-a-disconnect", [S(0), L(5, "disconnected")], None, 35),
    ("a-reconnect-cancels-the-grace", [S(0), L(5, "disconnected"), L(6, "connected")], None, 120),
    ("a-restart-postpones-the-silence", [S(0)], 1000, 1120),
    ("a-restart-postpones-the-grace", [S(0), L(5, "disconnected")], 1000, 1030),
    ("a-told-offline-is-not-looked-at-again", [S(0), Q(120)], None, None),
    ("first-seen-offline-is-not-looked-at", [S(0, activity="offline")], None, None),
    (
        "a-held-offline-when-its-cooldown-ends",
        [S(0), S(10, activity="offline"), S(20), S(30, activity="offline")],
        None,
        310,
    ),
    (
        "a-held-online-when-its-cooldown-ends-or-the-silence",
        [S(0), S(10, activity="offline"), S(20), S(310, activity="offline"), S(315)],
        None,
        320,
    ),
]


@pytest.mark.parametrize(
    ("steps", "consuming_since", "due"), [c[1:] for c in DUE], ids=[c[0] for c in DUE]
)
def test_silence_due(steps: list[Step], consuming_since: float | None, due: float | None) -> None:
    since = None if consuming_since is None else at(consuming_since)
    expected = None if due is None else at(due)
    assert silence_due(_watch(steps), THRESHOLDS, since) == expected


def test_nothing_changes_before_the_silence_is_due() -> None:
    # The timer at any instant before ``silence_due`` leaves the watch as it is.
    for _, steps, consuming_since, due in DUE:
        watch = _watch(steps)
        if due is None:
            continue
        since = at(-3600 if consuming_since is None else consuming_since)
        before = evaluate_silence(watch, at(due) - timedelta(seconds=1), since, THRESHOLDS)
        assert before.watch is watch
        assert evaluate_silence(watch, at(due), since, THRESHOLDS).watch != watch


def test_the_scripts_cover_every_message_key() -> None:
    scripts = [*CASES, *GEOFENCE_CASES]
    produced = {e.message_key for _, steps, _ in scripts for e in run(steps).events}
    assert produced == MESSAGE_KEYS
