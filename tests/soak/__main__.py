"""``python -m tests.soak``: run the soak, write its report, print ``RESULT``.

``just soak`` runs 30 minutes; CI runs ``python -m tests.soak --seconds 60 --gate``, which
exits 1 when open files, tasks or threads grew past ``growth.GATED`` after the warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.soak.growth import growths, violations
from tests.soak.load import drive
from tests.soak.report import render, unbounded


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    p.add_argument("--seconds", type=float, default=1800.0, help="load time (default 1800)")
    p.add_argument("--mowers", type=int, default=1000)
    p.add_argument("--warmup", type=float, help="seconds not judged (a third, at most 300)")
    p.add_argument("--interval", type=float, help="seconds between samples (10; 5 under 5 min)")
    p.add_argument("--command-every", type=float, default=180.0, help="a mower's commands, s")
    p.add_argument("--fault-every", type=float, default=2.0, help="s between injected faults")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report", default=".soak/report.md")
    p.add_argument("--gate", action="store_true", help="exit 1 when a gated measure grew too much")
    p.add_argument(
        "--tracemalloc-after", type=float, default=-1.0,
        help="trace the services' allocations from this second on (slow); report the growth",
    )  # fmt: skip
    p.add_argument("--replay", metavar="SAMPLES", help="report on a samples file of an earlier run")
    return p.parse_args()


def _written(path: Path) -> bool:
    return path.exists() and bool(path.read_text())


async def _ready(
    info: Path, proc: subprocess.Popen[bytes], timeout: float = 300.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(_written, info):
        if proc.poll() is not None:
            raise SystemExit(f"the soaked system exited with {proc.returncode} while starting")
        if time.monotonic() > deadline:
            raise SystemExit("the soaked system did not start in time")
        await asyncio.sleep(0.5)
    found: dict[str, Any] = json.loads(await asyncio.to_thread(info.read_text))
    return found


async def _main(args: argparse.Namespace, work: Path) -> int:
    info_file, samples_file = work / "info.json", work / "samples.jsonl"
    interval = args.interval or (5.0 if args.seconds < 300 else 10.0)
    warmup = args.warmup if args.warmup is not None else min(300.0, args.seconds / 3)
    cmd = [sys.executable, "-m", "tests.soak.target", "--mowers", str(args.mowers),
           "--seed", str(args.seed), "--interval", str(interval),
           "--fault-every", str(args.fault_every),
           "--info", str(info_file), "--samples", str(samples_file),
           "--tracemalloc-after", str(args.tracemalloc_after)]  # fmt: skip
    started = time.monotonic()
    # The child's log: where a failed start says why.
    log = (work / "target.log").open("wb")
    proc = subprocess.Popen(cmd, stderr=log)  # noqa: ASYNC220 - started once, waited in a thread
    try:
        info = await _ready(info_file, proc)
        boot_s = time.monotonic() - started
        rate = args.mowers / args.command_every
        counts = await drive(info["fleet_url"], info["token"], info["mowers"], rate=rate,
                             seconds=args.seconds, seed=args.seed)  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | str = await asyncio.to_thread(proc.wait, 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = f"killed after 120 s (SIGTERM ignored): {await asyncio.to_thread(proc.wait)}"
        log.close()
    return _finish(args, samples_file, {**meta_of(args, warmup, boot_s), "target exit": code},
                   counts, warmup)  # fmt: skip


def meta_of(args: argparse.Namespace, warmup: float, boot_s: float) -> dict[str, Any]:
    """What the report says about the run."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python -m tests.soak", *sys.argv[1:]]),
        "mowers": args.mowers, "seconds": args.seconds, "warm-up s": warmup,
        "start-up s": round(boot_s, 1), "cpus": os.cpu_count(),
    }  # fmt: skip


def _finish(
    args: argparse.Namespace,
    samples_file: Path,
    meta: dict[str, Any],
    counts: Counter[str],
    warmup: float,
) -> int:
    samples = [json.loads(line) for line in samples_file.read_text().splitlines() if line]
    found = growths(samples, warmup)
    problems, grew = violations(found), unbounded(found)
    meta = {**meta, "samples": len(samples), "commands": dict(counts)}
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(render(meta, found, problems, grew))
    traced = samples_file.with_name("tracemalloc.txt")
    if traced.exists():
        (report.parent / "tracemalloc.txt").write_text(traced.read_text())
    if samples_file.resolve() != (report.parent / "samples.jsonl").resolve():
        (report.parent / "samples.jsonl").write_text(samples_file.read_text())
    g = found
    print(
        f"RESULT seconds={args.seconds:g} mowers={args.mowers} commands={counts['issued']}"
        f" accepted={counts['http_202']} unanswered={counts['unanswered']}"
        f" rss_mb={g['demo.rss_mb'].start:.0f}->{g['demo.rss_mb'].end:.0f}"
        f" open_files={g['demo.open_files'].start:g}->{g['demo.open_files'].end:g}"
        f" tasks={g['demo.tasks'].start:g}->{g['demo.tasks'].end:g}"
        f" threads={g['demo.threads'].start:g}->{g['demo.threads'].end:g}"
        f" nats_rss_mb={g['nats-server.rss_mb'].start:.0f}->{g['nats-server.rss_mb'].end:.0f}"
        f" unbounded_growth={len(grew)} gate={'fail' if problems else 'pass'} report={report}"
    )
    for line in problems:
        print(f"gate: {line}", file=sys.stderr)
    return 1 if args.gate and problems else 0


def main() -> int:
    """Run the soak."""
    args = _parse()
    if args.replay:
        warmup = args.warmup if args.warmup is not None else min(300.0, args.seconds / 3)
        meta = {**meta_of(args, warmup, 0.0), "replayed": args.replay}
        return _finish(args, Path(args.replay), meta, Counter(), warmup)
    with tempfile.TemporaryDirectory(prefix="mowdeck-soak-run-") as work:
        return asyncio.run(_main(args, Path(work)))


if __name__ == "__main__":
    sys.exit(main())
