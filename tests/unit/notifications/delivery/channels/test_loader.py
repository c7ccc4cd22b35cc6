"""The entry point loader: channels by name, and a broken one reported by name."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import aiohttp
import pytest

from mowdeck.notifications.delivery.channels import (
    ENTRY_POINT_GROUP,
    ChannelLoadError,
    ChannelSettings,
    Delivery,
    DeliveryResult,
    load_channels,
)

MODULE = "tests_fake_channels"


class FakeChannel:
    closed: list[str] = []

    def __init__(self, name: str) -> None:
        self.name = name

    async def send(self, delivery: Delivery) -> DeliveryResult:
        return DeliveryResult(status="sent")

    async def close(self) -> None:
        FakeChannel.closed.append(self.name)


def good(settings: ChannelSettings, session: aiohttp.ClientSession) -> FakeChannel:
    return FakeChannel("good")


def broken(settings: ChannelSettings, session: aiohttp.ClientSession) -> FakeChannel:
    raise RuntimeError("no credentials configured")


def misnamed(settings: ChannelSettings, session: aiohttp.ClientSession) -> FakeChannel:
    return FakeChannel("other")


@pytest.fixture(autouse=True)
def fake_module() -> Iterator[None]:
    module = types.ModuleType(MODULE)
    module.good = good  # type: ignore[attr-defined]
    module.broken = broken  # type: ignore[attr-defined]
    module.misnamed = misnamed  # type: ignore[attr-defined]
    sys.modules[MODULE] = module
    FakeChannel.closed = []
    yield
    del sys.modules[MODULE]


def entry_points(**names: str) -> Any:
    eps = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in names.items()]

    def select(group: str) -> list[EntryPoint]:
        return eps if group == ENTRY_POINT_GROUP else []

    return select


def settings(*names: str) -> ChannelSettings:
    return ChannelSettings(notifications_channels=list(names))


async def test_enabled_channels_are_created_by_name() -> None:
    eps = entry_points(good=f"{MODULE}:good", broken=f"{MODULE}:broken")
    async with aiohttp.ClientSession() as session:
        channels = await load_channels(settings("good"), session, entry_points=eps)
    assert channels.names == {"good"}
    assert channels.get("good") is not None
    assert channels.get("broken") is None


async def test_a_broken_channel_is_named_with_its_entry_point_and_error() -> None:
    eps = entry_points(good=f"{MODULE}:good", broken=f"{MODULE}:broken")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChannelLoadError) as info:
            await load_channels(settings("good", "broken"), session, entry_points=eps)
    message = str(info.value)
    assert "broken: entry point tests_fake_channels:broken raised RuntimeError" in message
    assert "no credentials configured" in message
    assert list(info.value.failures) == ["broken"]
    assert FakeChannel.closed == ["good"]


async def test_an_entry_point_that_cannot_import_is_named() -> None:
    eps = entry_points(webpush="no_such_module_here:create")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChannelLoadError, match=r"webpush: entry point no_such_module_here"):
            await load_channels(settings("webpush"), session, entry_points=eps)


async def test_an_enabled_channel_without_entry_point_lists_the_installed_ones() -> None:
    eps = entry_points(good=f"{MODULE}:good")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChannelLoadError, match=r"telegram: no entry point .*installed: good"):
            await load_channels(settings("good", "telegram"), session, entry_points=eps)


async def test_a_factory_must_make_the_channel_it_is_named_for() -> None:
    eps = entry_points(good=f"{MODULE}:misnamed")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChannelLoadError, match="made a channel named 'other'"):
            await load_channels(settings("good"), session, entry_points=eps)


async def test_the_shipped_channels_load_from_their_entry_points(tmp_path: Any) -> None:
    eps = entry_points(
        webpush="mowdeck.notifications.delivery.channels.webpush:create_webpush_channel",
        ntfy="mowdeck.notifications.delivery.channels.ntfy:create_ntfy_channel",
        log="mowdeck.notifications.delivery.channels.log:create_log_channel",
    )
    config = ChannelSettings(
        notifications_channels=["webpush", "ntfy", "log"],
        notifications_vapid_key_file=str(tmp_path / "vapid.pem"),
        notifications_vapid_subject="mailto:ops@mowdeck.example",
    )
    async with aiohttp.ClientSession() as session:
        channels = await load_channels(config, session, entry_points=eps)
        assert channels.names == {"webpush", "ntfy", "log"}
        await channels.close()


async def test_webpush_without_a_subject_fails_at_start(tmp_path: Any) -> None:
    eps = entry_points(
        webpush="mowdeck.notifications.delivery.channels.webpush:create_webpush_channel"
    )
    config = ChannelSettings(
        notifications_channels=["webpush"],
        notifications_vapid_key_file=str(tmp_path / "vapid.pem"),
    )
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChannelLoadError, match=r"webpush: .*VapidKeyError.*VAPID_SUBJECT"):
            await load_channels(config, session, entry_points=eps)
