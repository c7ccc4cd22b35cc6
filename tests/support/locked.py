"""Asking a service while one of its tables is locked: a statement that cannot finish."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import asyncpg

__all__ = ["get_while_locked"]


async def get_while_locked(
    pool: asyncpg.Pool, table: str, url: str, headers: dict[str, str]
) -> tuple[int, Any, Mapping[str, str]]:
    """``GET url`` while ``table`` is locked until the answer has come: the status, the
    decoded body and the headers (the client waits up to 30 s)."""
    async with pool.acquire() as locker, locker.transaction():
        await locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(url, headers=headers) as r,
        ):
            return r.status, await r.json(content_type=None), r.headers
