"""``python -m tests.chaos.run --minutes N [--seed S]``: the chaos run (docs/reliability.md).

Brings up the production topology as processes (``topology.py``), drives load
(``driver.py``), injects every fault kind under it (``faults.py``), then checks the
invariants (``check.py``) and prints a ``RESULT`` line. Exit code 1 when anything was
lost or doubled, or a fault kind was not injected.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from mowdeck.authn import AuthSettings, TokenIssuer
from tests.chaos import check
from tests.chaos.driver import Driver
from tests.chaos.faults import KINDS, Injector, Probe, probe_mowers
from tests.chaos.sse import SseClient
from tests.chaos.topology import ACCOUNT, JWT_SECRET, USER, Topology, bring_up

SETTLE_SECONDS = 40.0  # the longest ttl (20 s), the grace (5 s), the finalizer, a margin


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run")
    parser.add_argument("--minutes", type=float, default=5.0, help="load and faults (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mowers", type=int, default=200)
    parser.add_argument("--rate", type=float, default=4.0, help="load commands a second")
    parser.add_argument("--workdir", type=Path, help="keep every process's log here")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mowdeck-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {args.seed}, {args.mowers} mowers, logs in {workdir}", flush=True)
    began = time.monotonic()
    topology = bring_up(workdir, args.mowers, args.seed)
    print(f"chaos: topology up in {time.monotonic() - began:.0f}s", flush=True)
    rc = 1
    try:
        rc = asyncio.run(_run(args, topology))
    finally:
        topology.close()
        if args.workdir is None and rc == 0:
            shutil.rmtree(workdir, ignore_errors=True)  # a failed run's logs are kept
    return rc


def _token() -> str:
    issuer = TokenIssuer(AuthSettings(jwt_secret=JWT_SECRET))
    return issuer.mint(USER, uuid.UUID(ACCOUNT), ttl_s=6 * 3600)


async def _json(method: str, url: str, token: str, body: object = None) -> object:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
        s.request(method, url, json=body, headers=headers) as r,
    ):
        if r.status >= 400:
            raise RuntimeError(f"{method} {url}: {r.status} {await r.text()}")
        return await r.json(content_type=None)


async def _registered(topology: Topology, token: str, count: int) -> None:
    """Until Fleet lists every simulated mower (the simulator registers them one by one)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        page = await _json("GET", f"{topology.url('fleet')}/v1/mowers?limit=1000", token)
        if len(page["mowers"]) >= count:  # type: ignore[index]
            return
        await asyncio.sleep(1.0)
    raise RuntimeError("the simulator's mowers did not all register within 120 s")


async def _subscribe(topology: Topology, token: str) -> None:
    """The run's user hears of every mower of the account, on the log channel."""
    base = topology.url("notifications")
    # The account's grant and mowers reach Notifications over the bus a moment after start.
    deadline = time.monotonic() + 60
    while True:
        try:
            await _json("PUT", f"{base}/v1/notifications/preferences", token, {"scope": "all"})
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)
    await _json("POST", f"{base}/v1/notifications/targets", token, {"channel": "log"})


async def _run(args: argparse.Namespace, topology: Topology) -> int:
    token = _token()
    since = datetime.now(UTC)
    rng = random.Random(args.seed)
    regs = await _json("GET", f"{topology.url('simulator')}/sim/registrations", token)
    mowers = sorted(str(r["mower_id"]) for r in regs)  # type: ignore[attr-defined]
    await _registered(topology, token, len(mowers))
    await _subscribe(topology, token)
    fleets = [topology.url("fleet"), topology.url("fleet-b")]
    driver = Driver(
        fleets, topology.url("simulator"), token, mowers, rng, time.monotonic(), rate=args.rate
    )
    probes = probe_mowers(mowers)
    driver.reserved |= {m for ms in probes.values() for m in ms}
    probe = Probe(driver, topology, probes)
    stop = asyncio.Event()
    probing = asyncio.ensure_future(probe.run(stop))
    # Full service before any load: every shard answers.
    while probe.served_since(0.0) is None and driver.now() < 120:
        await asyncio.sleep(0.5)
    print(f"chaos: every shard answers at {driver.now():.0f}s; load and faults start", flush=True)
    clients = [SseClient(topology.url("realtime"), token, rng.sample(mowers, 4)) for _ in range(3)]
    # The faults' own generator: their order, targets and gaps replay with the seed,
    # whatever the load (timed by the machine) drew meanwhile.
    injector = Injector(topology, driver, probe, random.Random(f"faults-{args.seed}"))
    duration = args.minutes * 60.0
    start = driver.now()
    tasks = [
        asyncio.ensure_future(driver.run(stop)),
        asyncio.ensure_future(driver.rules(stop)),
        *(asyncio.ensure_future(c.run(stop)) for c in clients),
    ]
    await injector.run(stop, deadline=start + duration)
    while driver.now() < start + duration:
        await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*tasks, probing, return_exceptions=True)
    print(f"chaos: load stopped at {driver.now():.0f}s; settling {SETTLE_SECONDS:.0f}s", flush=True)
    await asyncio.sleep(SETTLE_SECONDS)
    await driver.close()
    return await _check(topology, driver, injector, clients, token, since)


def _admin(topology: Topology) -> tuple[str, str]:
    env = dict(
        line.split("=", 1)
        for line in (topology.cluster.root / "admin.env").read_text().splitlines()
        if "=" in line
    )
    return env["MOWDECK_NATS_USER"], env["MOWDECK_NATS_PASSWORD"]


async def _check(  # noqa: PLR0917 - what the run produced, passed on once
    topology: Topology,
    driver: Driver,
    injector: Injector,
    clients: list[SseClient],
    token: str,
    since: datetime,
) -> int:
    f = check.Findings()
    trail = await check.audit(topology.url("fleet"), token, since)
    sent = await check.frames(topology.url("simulator"), driver.mowers)
    check.check_commands(f, driver, trail, sent, injector.faults)
    user, password = _admin(topology)
    urls = topology.cluster.urls
    states = await check.read_stream(urls, user, password, "telemetry.mower.*")
    results = await check.read_stream(urls, user, password, "command.result.mower.*")
    history, inbox, deliveries = await check.read_models(topology.host.database_url, since)
    check.check_states(f, states, history)
    check.check_notifications(f, driver, USER, inbox, deliveries)
    check.check_realtime(f, clients, results)
    kinds = sorted({x.kind for x in injector.faults})
    recoveries = [x.recovery_s for x in injector.faults]
    worst = max((r if r is not None else float("inf")) for r in recoveries) if recoveries else 0.0
    _report(f, injector, kinds)
    c = f.counts
    print(
        f"RESULT commands={c['commands']} accepted={c['accepted']} lost={c['lost']}"
        f" doubled={c['doubled']} estops_lost={c['estops_lost']} states_lost={c['states_lost']}"
        f" missing_notifications={c['missing_notifications']}"
        f" duplicate_notifications={c['duplicate_notifications']}"
        f" realtime_gaps={c['realtime_gaps']} faults={len(injector.faults)}"
        f" fault_kinds={len(kinds)}/{len(KINDS)} max_recovery_s={worst:.1f}",
        flush=True,
    )
    bad = c["lost"] + c["doubled"] + c["estops_lost"] + c["states_lost"]
    bad += c["missing_notifications"] + c["duplicate_notifications"] + c["realtime_gaps"]
    return 1 if bad or len(kinds) < len(KINDS) else 0


def _report(f: check.Findings, injector: Injector, kinds: list[str]) -> None:
    print("chaos: faults (kind, target, at, healed, recovery s):")
    for x in injector.faults:
        rec = "timeout" if x.recovery_s is None else f"{x.recovery_s:.1f}"
        print(f"  {x.kind:17} {x.target:16} {x.t:7.1f} {x.healed_t:7.1f} {rec:>8} {x.note}")
    missing = sorted(set(KINDS) - set(kinds))
    if missing:
        print(f"chaos: fault kinds not injected: {', '.join(missing)}")
    print("chaos: counts: " + " ".join(f"{k}={v}" for k, v in sorted(f.counts.items())))
    for reason, n in sorted(f.allowed.items()):
        print(f"chaos: allowed by design: {n} x {reason} (docs/reliability.md)")
    for line in f.listed[:200]:
        print(f"  {line}")


if __name__ == "__main__":
    sys.exit(main())
