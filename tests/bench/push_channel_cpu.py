"""CPU per Web Push delivery in the sending process, for comparing two versions of the code.

Run: python -m tests.bench.push_channel_cpu [--deliveries 6000] [--compare DIR] [--rounds 4]

One measurement builds the webpush channel through its entry point
(``create_webpush_channel``, as the service does), warms it up and sends
``--deliveries`` deliveries (64 in flight, real aes128gcm and VAPID) to the local push
service in its own process; it prints the sender's CPU time per delivery from
``getrusage``. ``--compare DIR`` runs measurements in child processes, alternating
between the code in DIR (e.g. an export of an older commit: ``git archive <commit>
mowdeck tests | tar -x -C DIR``) and this checkout, so machine load falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import resource
import statistics
import subprocess
import sys
from typing import Any


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(count: int, in_flight: int) -> float:
    import aiohttp  # noqa: PLC0415 - imported after --code put the code to measure first
    from py_vapid import Vapid02  # noqa: PLC0415

    from mowdeck.notifications.delivery.channels import ChannelSettings  # noqa: PLC0415
    from mowdeck.notifications.delivery.channels.webpush import create_webpush_channel  # noqa: PLC0415
    from tests.bench.push_work import deliveries, start_receiver  # noqa: PLC0415

    vapid = Vapid02()
    vapid.generate_keys()
    raw = vapid.private_key.private_numbers().private_value.to_bytes(32, "big")
    settings = ChannelSettings(
        notifications_push_hosts=["127.0.0.1"],
        notifications_insecure_hosts=["127.0.0.1"],
        notifications_http_connections=in_flight,
        notifications_vapid_private_key=base64.urlsafe_b64encode(raw).rstrip(b"=").decode(),
        notifications_vapid_subject="mailto:bench@mowdeck.example",
    )
    proc, info = start_receiver(200, 1_000_000)
    try:
        session = aiohttp.ClientSession()
        channel = create_webpush_channel(settings, session)
        work = deliveries(info["subscriptions"], count)
        gate = asyncio.Semaphore(in_flight)
        statuses: dict[str, int] = {}

        async def one(delivery: Any) -> None:
            async with gate:
                result = await channel.send(delivery)
            statuses[result.status] = statuses.get(result.status, 0) + 1

        await asyncio.gather(*(one(d) for d in work[:512]))
        statuses.clear()
        started = _cpu()
        await asyncio.gather(*(one(d) for d in work))
        used = _cpu() - started
        await channel.close()
        await session.close()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    if statuses != {"sent": count}:
        raise RuntimeError(f"not every delivery was sent: {statuses}")
    return used / count * 1e6


def _child(code: str | None, args: argparse.Namespace) -> float:
    command = [sys.executable, "-m", "tests.bench.push_channel_cpu", "--deliveries"]
    command += [str(args.deliveries), "--in-flight", str(args.in_flight)]
    if code:
        command += ["--code", code]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1].split("=")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deliveries", type=int, default=6000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--code", help="import mowdeck from this directory")
    parser.add_argument("--compare", help="alternate with the code in this directory")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="a few hundred deliveries, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.deliveries = 300
    if args.compare:
        before: list[float] = []
        after: list[float] = []
        for _ in range(args.rounds):
            before.append(_child(args.compare, args))
            after.append(_child(None, args))
        for name, values in (("before", before), ("after", after)):
            shown = " ".join(f"{v:.0f}" for v in values)
            print(f"{name}: median {statistics.median(values):.0f} µs CPU per delivery ({shown})")
        b, a = statistics.median(before), statistics.median(after)
        print(f"RESULT before_cpu_us={b:.0f} after_cpu_us={a:.0f} ratio={b / a:.2f}")
        return
    if args.code:
        sys.path.insert(0, args.code)
    print(f"cpu_us_per_delivery={asyncio.run(_measure(args.deliveries, args.in_flight)):.1f}")


if __name__ == "__main__":
    main()
