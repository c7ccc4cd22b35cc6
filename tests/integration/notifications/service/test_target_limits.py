"""A real Notifications service limits new targets per user: 429 past the burst."""

from __future__ import annotations

import aiohttp

from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer
from tests.integration.notifications.service.conftest import AUTH, ServiceFactory, grant
from tests.unit.notifications.samples import ACCOUNT


async def test_past_the_user_s_burst_a_new_target_is_429_and_not_stored(
    make_service: ServiceFactory, authorizer: LocalAuthorizer
) -> None:
    service = await make_service(
        notifications_targets_per_user_rate=0.001, notifications_targets_per_user_burst=3
    )
    for user in ("ann", "bob"):
        await grant(authorizer, user)
    url = f"{service.url}/v1/notifications/targets"

    def headers(user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {TokenIssuer(AUTH).mint(user, ACCOUNT)}"}

    async with aiohttp.ClientSession() as http:
        statuses, problems = [], []
        for _ in range(5):
            async with http.post(url, json={"channel": "log"}, headers=headers("ann")) as r:
                statuses.append(r.status)
                if r.status == 429:
                    assert int(r.headers["Retry-After"]) >= 1
                    problems.append(await r.json(content_type="application/problem+json"))
        # A malformed body counts too: the limit comes before anything is read.
        malformed = {**headers("ann"), "Content-Type": "application/json"}
        async with http.post(url, data=b"{", headers=malformed) as r:
            statuses.append(r.status)
        async with http.post(url, json={"channel": "log"}, headers=headers("bob")) as r:
            assert r.status == 201
        async with http.get(url, headers=headers("ann")) as r:
            stored = (await r.json())["items"]
    assert statuses == [201, 201, 201, 429, 429, 429]
    assert {p["limit"] for p in problems} == {"targets_per_user"}
    assert {p["type"] for p in problems} == {"https://mowdeck.dev/problems/rate-limited"}
    assert len(stored) == 3
    refused = service.metrics_registry.get_sample_value(
        "mowdeck_notifications_rate_limited_total", {"limit": "targets_per_user"}
    )
    assert refused == 3
