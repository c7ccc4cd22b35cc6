"""The ``openmower`` connection: one mower through its MQTT broker (docs/adapters.md).

The link is up while the mower's ``robot_state/json`` keeps coming, not while the broker
answers: OpenMower sets no last will, so a mower that is switched off leaves the broker
silent, and the link goes down ``stale_seconds`` after its last state. Commands are
published as ``action`` ids and confirmed by the states that follow (``mapping.judge``);
OpenMower acknowledges nothing. The broker's host is checked against
``MOWDECK_GATEWAY_DEVICE_HOSTS`` before every connect, and its login is read from the
named credential on every connect (a rotated secret is used on the next one).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from dataclasses import dataclass, field
from datetime import UTC, datetime

import aiomqtt
import msgspec
import structlog
import yarl

from contracts.v1 import CommandEnvelope, ManualDrive, MowerRegistration
from mowdeck.devices.openmower import Datum, OpenMowerOptions
from mowdeck.gateway.connections.credentials import CredentialError, MqttLogin
from mowdeck.gateway.connections.once import CommandOnce
from mowdeck.gateway.connections.openmower import mapping
from mowdeck.gateway.connections.port import (
    CommandOutcome,
    CommandTimeoutError,
    ConnectionDeps,
    ConnectionEvents,
    LinkDownError,
    LinkLostError,
    connection_options,
)
from mowdeck.kit.background import cancel_and_wait
from simulator.openmower.protocol import (
    ProtocolError,
    RobotState,
    Topics,
    decode_actions,
    decode_robot_state,
    encode_teleop,
)

__all__ = ["OpenMowerConnection"]

log = structlog.get_logger("mowdeck.gateway.openmower")

DRIVE_REPEAT_SECONDS = 0.2  # a held velocity is published again this often
_EVENT_BYTES = 4096  # an events/json message kept whole up to this size


class _MapDatum(msgspec.Struct, frozen=True):
    datum: Datum | None = None


@dataclass(slots=True)
class _Waiter:
    plan: mapping.Plan
    future: asyncio.Future[CommandOutcome]
    heard: RobotState | None = field(default=None)


class OpenMowerConnection:
    """One OpenMower; reconnects with jittered backoff until closed."""

    def __init__(
        self, registration: MowerRegistration, events: ConnectionEvents, *, deps: ConnectionDeps
    ) -> None:
        self.options = connection_options(registration, OpenMowerOptions)
        url = yarl.URL(self.options.broker)
        self._host, self._port = url.host or "", url.port or 1883
        self._tls = url.scheme == "mqtts"
        self.registration = registration
        self.topics = Topics(self.options.topic_prefix)
        self._events = events
        self._deps = deps
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._drive: asyncio.Task[None] | None = None
        self._closed = False
        self._up = False
        self._heard_at = 0.0
        self.last: RobotState | None = None
        self.actions: dict[str, bool] | None = None
        self._map_datum: Datum | None = None
        self._last_event: object | None = None
        self._waiters: list[_Waiter] = []
        self._once = CommandOnce()
        self.reason: str | None = None  # why the link is down, when it is
        self._log = log.bind(mower_id=str(registration.mower_id))

    @property
    def connected(self) -> bool:
        """True while the mower's robot_state is fresh."""
        return self._up

    @property
    def datum(self) -> Datum | None:
        """The map origin: the options', else the one map/json names."""
        return self.options.datum or self._map_datum

    async def open(self) -> None:
        """Start the reconnect loop in the background and return at once."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(
                self._run(), name=f"openmower-link-{self.registration.mower_id}"
            )

    async def close(self) -> None:
        """Close the link for good and report it down."""
        self._closed = True
        await self._stop_drive()
        if self._task is not None:
            await cancel_and_wait(self._task, name="openmower link")
            self._task = None

    # Commands.

    async def send(self, envelope: CommandEnvelope, *, timeout: float) -> CommandOutcome:
        """Carry out a command and wait for the states that confirm it."""
        cid = envelope.command_id
        done = self._once.known(cid)
        if done is not None:
            return done  # a redelivery: the first outcome, never a second action
        client, last = self._client, self.last
        if not self._up or client is None or last is None:
            raise LinkDownError(f"mower {self.registration.mower_id} is not connected")
        return await self._once.run(
            cid,
            lambda fut: self._carry_out(client, last, envelope, fut, timeout),
            timeout=timeout,
            timed_out=self._timeout_error,
        )

    async def _carry_out(
        self,
        client: aiomqtt.Client,
        last: RobotState,
        envelope: CommandEnvelope,
        fut: asyncio.Future[CommandOutcome],
        timeout: float,
    ) -> CommandOutcome:
        if envelope.is_emergency:
            # Whatever else: no wheel turns on a held teleop velocity after a stop.
            await self._stop_drive()
            await self._publish(client, self.topics.teleop, encode_teleop(0.0, 0.0), qos=0)
        plan = mapping.plan(envelope.command, last, self.actions)
        if isinstance(plan, CommandOutcome):
            return plan
        if plan.topic == "teleop":
            assert plan.velocity is not None
            assert isinstance(envelope.command, ManualDrive)
            await self._hold_drive(client, plan.velocity, envelope.command.ttl_ms / 1000.0)
            return CommandOutcome("executed", "sent on teleop (OpenMower acknowledges nothing)")
        assert plan.action_id is not None
        waiter = _Waiter(plan, fut)
        self._waiters.append(waiter)
        try:
            await self._publish(client, self.topics.action, plan.action_id.encode(), qos=1)
            left = (envelope.expires_at - datetime.now(UTC)).total_seconds()
            bound = max(0.05, min(timeout, left))
            try:
                return await asyncio.wait_for(asyncio.shield(fut), bound)
            except TimeoutError:
                if waiter.heard is None:
                    raise self._timeout_error(bound) from None
                until = "before the command expired" if left <= timeout else f"in {bound:g} s"
                return CommandOutcome(
                    "failed",
                    f"the mower still reports {waiter.heard.current_state} {until} after "
                    f"{plan.action_id}",
                )
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    async def _publish(self, client: aiomqtt.Client, topic: str, body: bytes, qos: int) -> None:
        try:
            await client.publish(topic, body, qos=qos)
        except aiomqtt.MqttError as err:
            raise LinkDownError(f"broker refused the publish on {topic}: {err}") from err

    async def _hold_drive(
        self, client: aiomqtt.Client, velocity: tuple[float, float], ttl: float
    ) -> None:
        """Publish ``velocity`` now and again until ``ttl`` passes, then zero (dead-man)."""
        await self._stop_drive()
        vx, vz = velocity
        await self._publish(client, self.topics.teleop, encode_teleop(vx, vz), qos=0)
        if vx or vz:
            self._drive = asyncio.create_task(self._drive_until(client, vx, vz, ttl))

    async def _drive_until(self, client: aiomqtt.Client, vx: float, vz: float, ttl: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + ttl
        with contextlib.suppress(aiomqtt.MqttError):
            while (left := end - loop.time()) > 0:
                await asyncio.sleep(min(DRIVE_REPEAT_SECONDS, left))
                if loop.time() < end:
                    await client.publish(self.topics.teleop, encode_teleop(vx, vz), qos=0)
            await client.publish(self.topics.teleop, encode_teleop(0.0, 0.0), qos=0)

    async def _stop_drive(self) -> None:
        task, self._drive = self._drive, None
        if task is not None and not task.done():
            await cancel_and_wait(task, name="openmower drive")

    def _timeout_error(self, timeout: float) -> CommandTimeoutError:
        return CommandTimeoutError(
            f"mower {self.registration.mower_id} sent no robot_state within {timeout:g} s"
        )

    # The link.

    async def _run(self) -> None:
        opts = self.options
        delay = opts.backoff_initial_seconds
        while not self._closed:
            heard = False
            try:
                heard = await self._session()
            except asyncio.CancelledError:
                self._down("closed")
                raise
            except Exception as err:
                self._log.exception("openmower link failed; reconnecting")
                self._down(f"link error: {err!r}")
            if heard:
                delay = opts.backoff_initial_seconds
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, opts.backoff_max_seconds)

    def _failed(self, reason: str) -> None:
        if reason != self.reason:
            self._log.warning("openmower link down", reason=reason)
        self.reason = reason

    async def _session(self) -> bool:
        """One broker connection; True when the mower was heard on it."""
        refusal = self._deps.hosts.refusal(self.options.broker)
        if refusal is not None:
            self._failed(f"broker {self.options.broker} {refusal}")
            return False
        login: MqttLogin | None = None
        if self.options.credentials is not None:
            try:
                login = self._deps.credentials.read(self.options.credentials, MqttLogin)
            except CredentialError as err:
                self._failed(str(err))
                return False
        client = aiomqtt.Client(
            self._host,
            self._port,
            username=login.username if login else None,
            password=login.password if login else None,
            identifier=f"mowdeck-{self.registration.mower_id.hex[:12]}-{random.getrandbits(32):08x}",
            tls_context=ssl.create_default_context() if self._tls else None,
            timeout=self.options.connect_timeout_seconds,
            keepalive=max(5, int(self.options.stale_seconds)),
        )
        heard_before = self._heard_at
        reason = "broker connection closed"
        try:
            async with client:
                self._client = client
                for topic, qos in (
                    (self.topics.robot_state, 0),
                    (self.topics.actions, 1),
                    (self.topics.map, 1),
                    (self.topics.events, 0),
                ):
                    await client.subscribe(topic, qos=qos)
                watch = asyncio.create_task(self._watch_staleness())
                try:
                    async for message in client.messages:
                        self._on_message(message)
                finally:
                    watch.cancel()
        except aiomqtt.MqttError as err:
            reason = f"broker {self._host}:{self._port}: {err}"
            self._failed(reason)
        finally:
            self._client = None
            self._down(reason)
        return self._heard_at != heard_before

    async def _watch_staleness(self) -> None:
        loop = asyncio.get_running_loop()
        stale = self.options.stale_seconds
        while True:
            await asyncio.sleep(stale / 4)
            if self._up and loop.time() - self._heard_at > stale:
                driving = self._drive is not None and not self._drive.done()
                self._down(f"no robot_state for {stale:g} s (OpenMower sets no last will)")
                client = self._client
                if driving and client is not None:
                    # The broker still answers: a velocity held for a mower gone silent
                    # ends now, not when the mower's own teleop timeout (if any) says.
                    with contextlib.suppress(aiomqtt.MqttError):
                        await client.publish(self.topics.teleop, encode_teleop(0.0, 0.0))

    def _on_message(self, message: aiomqtt.Message) -> None:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        topic = message.topic.value
        try:
            if topic == self.topics.robot_state:
                self._on_state(decode_robot_state(payload))
            elif topic == self.topics.actions:
                self.actions = decode_actions(payload)
            elif topic == self.topics.map:
                self._map_datum = msgspec.json.decode(payload, type=_MapDatum).datum
            elif topic == self.topics.events and len(payload) <= _EVENT_BYTES:
                self._last_event = msgspec.json.decode(payload)
        except (ProtocolError, msgspec.DecodeError, msgspec.ValidationError) as err:
            self._log.debug("openmower message not understood", topic=topic, error=str(err))

    def _on_state(self, rs: RobotState) -> None:
        self.last = rs
        self._heard_at = asyncio.get_running_loop().time()
        if not self._up:
            self._up, self.reason = True, None
            self._events.on_link(True, None)
        reg = self.registration
        self._events.on_state(
            mapping.state(
                rs,
                mower_id=reg.mower_id,
                account_id=reg.account_id,
                now=datetime.now(UTC),
                datum=self.datum,
                last_event=self._last_event,
            )
        )
        for waiter in self._waiters:
            waiter.heard = rs
            outcome = mapping.judge(waiter.plan, rs)
            if outcome is not None and not waiter.future.done():
                waiter.future.set_result(outcome)

    def _down(self, reason: str) -> None:
        self.reason = reason
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(
                    LinkLostError(f"link lost before the mower confirmed: {reason}")
                )
        if self._drive is not None:
            self._drive.cancel()
            self._drive = None
        if self._up:
            self._up = False
            self._events.on_link(False, reason)
