"""Rate limits on a real Realtime: stream tickets per user, sign-in codes per address."""

from __future__ import annotations

import aiohttp

from mowdeck.authn import TokenIssuer
from mowdeck.kit.bus import Bus
from mowdeck.realtime.console import OneTimeCodes
from mowdeck.realtime.service import RealtimeService
from tests.integration.realtime.conftest import ACCOUNT, ServiceFactory

SLOW = 0.001  # hardly any refill within a test: a burst is all there is


def refused(service: RealtimeService, limit: str) -> float | None:
    return service.metrics_registry.get_sample_value(
        "mowdeck_realtime_rate_limited_total", {"limit": limit}
    )


async def test_past_the_user_s_burst_a_ticket_is_429_and_none_is_stored(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer, bus: Bus
) -> None:
    bucket = "realtime-tickets-limited"
    service = await make_service(
        realtime_tickets_per_user_rate=SLOW,
        realtime_tickets_per_user_burst=3,
        realtime_ticket_bucket=bucket,
    )
    url = f"{service.url}/v1/stream/tickets"
    alice = {"Authorization": f"Bearer {issuer.mint('alice', ACCOUNT)}"}
    statuses = []
    for _ in range(5):
        async with http.post(url, headers=alice) as answer:
            statuses.append(answer.status)
            if answer.status == 429:
                assert int(answer.headers["Retry-After"]) >= 1
                problem = await answer.json(content_type="application/problem+json")
                assert problem["type"] == "https://mowdeck.dev/problems/rate-limited"
                assert problem["limit"] == "tickets_per_user"
    assert statuses == [201, 201, 201, 429, 429]
    bob = {"Authorization": f"Bearer {issuer.mint('bob', ACCOUNT)}"}
    async with http.post(url, headers=bob) as answer:
        assert answer.status == 201
    kv = await bus.js.key_value(bucket)
    assert len(await kv.keys()) == 4  # alice's three and bob's one
    assert refused(service, "tickets_per_user") == 2


async def test_past_an_address_s_burst_sign_in_codes_are_refused_even_a_good_one(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    codes = OneTimeCodes(ttl_s=60)
    service = await make_service(
        console_codes=codes,
        realtime_sign_ins_per_address_rate=SLOW,
        realtime_sign_ins_per_address_burst=3,
    )
    url = f"{service.url}/console/exchange"
    statuses = []
    for n in range(3):
        # A client naming other addresses changes nothing: no proxy is trusted.
        headers = {"X-Forwarded-For": f"198.51.100.{n}"}
        async with http.post(url, json={"code": f"guess-{n}"}, headers=headers) as answer:
            statuses.append(answer.status)
    good = codes.issue(issuer.mint("alice", ACCOUNT))
    async with http.post(url, json={"code": good}) as answer:
        statuses.append(answer.status)
        problem = await answer.json(content_type="application/problem+json")
    assert statuses == [400, 400, 400, 429]
    assert problem["limit"] == "sign_ins_per_address"
    assert refused(service, "sign_ins_per_address") == 1
    assert codes.redeem(good) is not None  # refused unread: the code is still good


async def test_behind_a_trusted_proxy_each_client_address_has_a_bucket_of_its_own(
    make_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    service = await make_service(
        console_codes=OneTimeCodes(ttl_s=60),
        realtime_sign_ins_per_address_rate=SLOW,
        realtime_sign_ins_per_address_burst=2,
        realtime_trusted_proxies=["127.0.0.0/8"],
    )
    url = f"{service.url}/console/exchange"

    async def attempt(client: str) -> int:
        headers = {"X-Forwarded-For": f"203.0.113.9, {client}"}
        async with http.post(url, json={"code": "guess"}, headers=headers) as answer:
            return answer.status

    assert [await attempt("198.51.100.1") for _ in range(3)] == [400, 400, 429]
    assert [await attempt("198.51.100.2") for _ in range(3)] == [400, 400, 429]
    assert refused(service, "sign_ins_per_address") == 2
