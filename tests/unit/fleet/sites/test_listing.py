"""Pages of ``fleet.sites.areas``: the limit, the cut at the payload budget, one site alone."""

from __future__ import annotations

import uuid

from contracts.v1 import Area, SiteAreas, encode
from mowdeck.fleet.sites.listing import page_reply

RING = [(0.0, 0.0), (0.001, 0.0), (0.001, 0.001), (0.0, 0.0)]


def _sites(count: int, areas: int = 1) -> list[SiteAreas]:
    return [
        SiteAreas(
            site_id=uuid.UUID(int=i + 1),
            account_id=uuid.UUID(int=99),
            version=1,
            areas=[Area(name=f"A{a}", kind="work_area", rings=[RING]) for a in range(areas)],
        )
        for i in range(count)
    ]


def test_a_page_read_with_one_more_says_more_follow() -> None:
    sites = _sites(3)
    reply = page_reply(sites, 2, 1_000_000)
    assert [s.site_id for s in reply.sites] == [sites[0].site_id, sites[1].site_id]
    assert reply.next_after == sites[1].site_id
    last = page_reply(sites[2:], 2, 1_000_000)
    assert (len(last.sites), last.next_after) == (1, None)


def test_a_page_is_cut_at_the_budget_and_continues_behind_its_last_site() -> None:
    sites = _sites(5, areas=3)
    budget = len(encode(sites[0])) * 2 + 200
    reply = page_reply(sites, 5, budget)
    assert 1 <= len(reply.sites) < 5
    assert len(encode(reply)) <= budget
    assert reply.next_after == reply.sites[-1].site_id


def test_a_site_larger_than_the_budget_still_goes_out_alone() -> None:
    sites = _sites(2, areas=50)
    reply = page_reply(sites, 2, 100)
    assert [s.site_id for s in reply.sites] == [sites[0].site_id]
    assert reply.next_after == sites[0].site_id
    assert page_reply([], 10, 100).sites == []
