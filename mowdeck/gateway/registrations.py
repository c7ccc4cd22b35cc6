"""Fleet's registrations applied to this shard: its mowers, their controllers and links."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import structlog

from contracts.v1 import MowerRegistration, MowerState
from mowdeck.devices.endpoints import EndpointPolicy
from mowdeck.gateway.actor import LinkChanged, Rename, StateReported
from mowdeck.gateway.closing import ControllerClosing
from mowdeck.gateway.connections import (
    ConnectionAdapters,
    ConnectionDeps,
    MowerConnection,
    UnknownConnectionKindError,
)
from mowdeck.gateway.endpoint_holders import EndpointHolders
from mowdeck.gateway.metrics import GatewayMetrics, accounts_mostly_offline
from mowdeck.gateway.mowers import Change, ShardMowers
from mowdeck.gateway.routing import ControllerRouter
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.seed import FleetSeed

__all__ = ["ShardRegistrations", "registration_seed"]

log = structlog.get_logger("mowdeck.gateway")

Tell = Callable[[uuid.UUID, object], None]


class _Link:
    """A connection's events, told to the mower's controller."""

    __slots__ = ("_tell", "mower_id")

    def __init__(self, tell: Tell, mower_id: uuid.UUID) -> None:
        self._tell = tell
        self.mower_id = mower_id

    def on_state(self, state: MowerState) -> None:
        if state.mower_id != self.mower_id:
            log.warning(
                "state for another mower dropped",
                mower_id=str(self.mower_id),
                reported=str(state.mower_id),
            )
            return
        self._tell(self.mower_id, StateReported(state))

    def on_link(self, up: bool, reason: str | None) -> None:
        self._tell(self.mower_id, LinkChanged(up, reason))


class ShardRegistrations:
    """Adds, updates and removes this shard's mowers, their controllers and device links.

    A registration whose connection no adapter takes (an unknown kind, options the adapter
    refuses: Fleet does not know the adapters' options), whose device URL
    ``MOWDECK_GATEWAY_DEVICE_HOSTS`` does not allow (reason ``endpoint_not_allowed``: Fleet
    refuses those too, but a registration stored before that rule, or under a wider list
    in Fleet, reaches the gateway still) or whose device endpoint another mower of the
    shard holds (``endpoint_taken``: two links to one device replace each other there) is
    logged, counted in ``mowdeck_gateway_registrations_refused_total{reason}`` and skipped:
    a new mower is not added, and a known mower whose connection changed to it is removed,
    since the link it had is no longer its registration's. The shard's other mowers are
    not affected. A registration refused as ``endpoint_taken`` waits for the endpoint: when
    its holder is removed or moves elsewhere, and its link is closed, the registration that
    waited longest is applied.
    """

    def __init__(
        self,
        mowers: ShardMowers,
        router: ControllerRouter,
        closing: ControllerClosing,
        *,
        adapters: ConnectionAdapters,
        metrics: GatewayMetrics,
        connections: dict[uuid.UUID, MowerConnection],
        endpoints: EndpointPolicy,
        deps: ConnectionDeps,
    ) -> None:
        self.mowers = mowers
        self._router = router
        self._closing = closing
        self._adapters = adapters
        self._metrics = metrics
        self._endpoints = endpoints
        self._deps = deps  # what the links share, handed to every connection built
        self._holders = EndpointHolders()
        self.connections = connections  # the device links by mower, read by the effects
        # Counted when scraped, not per link change (gateway/metrics.py).
        metrics.accounts_offline.set_function(
            lambda: accounts_mostly_offline(self.mowers, self.connections)
        )

    async def apply(self, registration: MowerRegistration) -> None:
        """Add or update a mower of this shard."""
        mower_id = registration.mower_id
        current = self.mowers.get(mower_id)
        conn: MowerConnection | None = None
        key: str | None = None
        if self.mowers.owns(mower_id) and (
            current is None or current.connection != registration.connection
        ):
            self._holders.stop_waiting(mower_id)
            self._metrics.registrations_waiting.set(self._holders.waiting)
            key = self._endpoints.key(registration.connection)
            holder = None if key is None else self._holders.holder(key)
            if key is not None and holder not in (None, mower_id):
                await self._wait_for(key, registration, holder)
                return
            conn = self._connection(registration)
            if conn is None:
                await self.remove(mower_id)
                return
            if key is not None:
                # Held before the first await: an apply meanwhile sees it taken.
                self._holders.hold(key, mower_id)
        change = self.mowers.apply(registration)
        if change in (Change.FOREIGN, Change.UNCHANGED):
            return
        if change is Change.RENAMED:
            self._router.tell(mower_id, Rename(registration))
            return
        left: str | None = None
        if change is Change.RECONNECT:
            assert current is not None  # a reconnect changes a known mower
            left = self._endpoints.key(current.connection)
            old = self.connections.pop(mower_id, None)
            if old is not None:
                await old.close()
            self._router.tell(mower_id, Rename(registration))
            self._router.tell(mower_id, LinkChanged(False, "connection changed"))
        else:
            await self._router.start(mower_id)
        self._metrics.mowers_known.set(len(self.mowers))
        assert conn is not None  # an added or reconnected mower has a new connection
        self.connections[mower_id] = conn
        await conn.open()
        log.info(
            "mower registered",
            mower_id=str(mower_id),
            change=change.value,
            kind=registration.connection.kind,
        )
        if left is not None and left != key:
            await self._hand_over(left, mower_id)

    async def _wait_for(
        self, key: str, registration: MowerRegistration, holder: uuid.UUID | None
    ) -> None:
        # Another mower of the shard holds the device: never dialled while it does.
        self._refused(
            registration,
            "endpoint_taken",
            "another mower of this shard holds its device endpoint; waiting for it",
            holder=str(holder),
        )
        await self.remove(registration.mower_id)  # the link it had is not its registration's
        if self._holders.holder(key) is None:  # the holder left while that link closed
            await self.apply(registration)
            return
        self._holders.wait(key, registration)
        self._metrics.registrations_waiting.set(self._holders.waiting)

    async def _hand_over(self, key: str, mower_id: uuid.UUID) -> None:
        """``mower_id`` left ``key`` (its link closed): the longest waiting registration
        for it is applied."""
        current = self.mowers.get(mower_id)
        if current is not None and self._endpoints.key(current.connection) == key:
            return  # registered on it again meanwhile: still its own
        waiting = self._holders.release(key, mower_id)
        self._metrics.registrations_waiting.set(self._holders.waiting)
        if waiting is not None:
            log.info(
                "registration takes a freed endpoint",
                mower_id=str(waiting.mower_id),
                previous=str(mower_id),
            )
            await self.apply(waiting)

    def _connection(self, registration: MowerRegistration) -> MowerConnection | None:
        kind = registration.connection.kind
        try:
            factory = self._adapters.factory(kind)
        except UnknownConnectionKindError as err:
            self._refused(registration, "unknown_kind", str(err))
            return None
        malformed = self._endpoints.options_refusal(registration.connection)
        if malformed is not None:
            self._refused(registration, "invalid", malformed.detail)
            return None
        refusal = self._endpoints.refusal(registration.connection)
        if refusal is not None:
            self._refused(registration, "endpoint_not_allowed", refusal.detail)
            return None
        try:
            return factory(
                registration,
                _Link(self._router.tell, registration.mower_id),
                deps=self._deps,
            )
        except Exception as err:  # an adapter refusing its options raises what it likes
            self._refused(registration, "invalid", str(err))
            return None

    def _refused(
        self, registration: MowerRegistration, reason: str, error: str, **context: str
    ) -> None:
        self._metrics.registrations_refused.labels(reason=reason).inc()
        log.error(
            "registration refused",
            mower_id=str(registration.mower_id),
            kind=registration.connection.kind,
            reason=reason,
            error=error,
            **context,
        )

    async def remove(self, mower_id: uuid.UUID) -> None:
        """Forget a mower: close its link and controller, report it disconnected."""
        self._holders.stop_waiting(mower_id)
        self._metrics.registrations_waiting.set(self._holders.waiting)
        registration = self.mowers.remove(mower_id)
        if registration is None:
            return
        self._metrics.mowers_known.set(len(self.mowers))
        conn = self.connections.pop(mower_id, None)
        if conn is not None:
            await conn.close()
        await self._closing.close(mower_id, "mower removed")
        await self._router.stop(mower_id)
        log.info("mower removed", mower_id=str(mower_id))
        key = self._endpoints.key(registration.connection)
        if key is not None:
            await self._hand_over(key, mower_id)

    async def close_links(self) -> None:
        """Close every device link."""
        for conn in list(self.connections.values()):
            await conn.close()
        self.connections.clear()


def registration_seed(
    s: GatewaySettings,
    bus: Bus,
    registrations: ShardRegistrations,
    metrics: GatewayMetrics,
    on_seeded: Callable[[], object] | None = None,
) -> FleetSeed:
    """The shard's mowers from Fleet into ``registrations``, then every registration event
    as it comes; ``on_seeded()`` once the list is applied."""
    return FleetSeed(
        bus,
        apply=registrations.apply,
        remove=registrations.remove,
        follow_events=True,
        shard_index=s.shard_index,
        shard_count=s.shard_count,
        request_timeout=s.fleet_list_timeout_seconds,
        retry_initial=s.fleet_retry_initial_seconds,
        retry_max=s.fleet_retry_max_seconds,
        on_retry=metrics.fleet_retries.inc,
        on_seeded=on_seeded,
        name="fleet-list-seed",
    )
