"""A delivery worker in a process of its own, for the crash test: ``python -m
tests.integration.notifications.delivery.worker_child <dsn> <lease seconds>``.

It prints ``ready`` once it listens, then delivers until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

import asyncpg

from mowdeck.notifications.infra import Stores
from tests.integration.notifications.delivery.worker_support import delivery_settings, worker_for


async def main(dsn: str, lease: float) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    settings = delivery_settings(
        notifications_lease_seconds=lease, notifications_send_timeout_seconds=60.0
    )
    async with worker_for(Stores.postgres(pool).deliveries, settings, start=True):
        await asyncio.sleep(0.3)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
