"""The ``automower`` connection: one mower through its account's link (``account.py``).

Up while the account link is up and its mowers list has the mower. Its state is the
snapshot's attributes with every event since merged on. A command is one API request
(``mapping.plan``); the API answers 202 before the mower acts, so the outcome is what
the events that follow say (``mapping.judge``), bounded by the command's expiry. An
emergency stop is a ``Pause`` sent at once, ahead of the account's request queue, and
``executed`` only once the mower reports itself stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from contracts.v1 import CommandEnvelope, MowerRegistration
from mowdeck.devices.automower import AutomowerOptions
from mowdeck.gateway.connections.automower import mapping
from mowdeck.gateway.connections.automower.account import AccountLink, account_for
from mowdeck.gateway.connections.once import CommandOnce
from mowdeck.gateway.connections.port import (
    CommandOutcome,
    CommandTimeoutError,
    ConnectionDeps,
    ConnectionEvents,
    LinkDownError,
    connection_options,
)
from simulator.automower.protocol import Event, MowerAttributes

__all__ = ["AutomowerConnection"]

log = structlog.get_logger("mowdeck.gateway.automower")

_SHOWN = 300


@dataclass(slots=True)
class _Waiter:
    plan: mapping.Plan
    future: asyncio.Future[CommandOutcome]
    heard: MowerAttributes | None = None


class AutomowerConnection:
    """One Automower, through the account link of its credential."""

    def __init__(
        self, registration: MowerRegistration, events: ConnectionEvents, *, deps: ConnectionDeps
    ) -> None:
        self.options = connection_options(registration, AutomowerOptions)
        self.registration = registration
        self.vendor_id = self.options.vendor_id
        self._zone = self.options.zone
        self._events = events
        self._deps = deps
        self._account: AccountLink | None = None
        self._up = False
        self._closed = False
        self.last: MowerAttributes | None = None
        self.reason: str | None = "not connected yet"
        self._waiters: list[_Waiter] = []
        self._once = CommandOnce()

    @property
    def connected(self) -> bool:
        """True while the account link is up and has this mower."""
        return self._up

    @property
    def account(self) -> AccountLink | None:
        """The account link this mower is attached to while open."""
        return self._account

    async def open(self) -> None:
        """Attach to the credential's account link (started by its first mower)."""
        if self._account is None and not self._closed:
            self._account = account_for(self.options.credentials, self._deps)
            self._account.attach(self)

    async def close(self) -> None:
        """Detach for good (the last mower of an account closes its link)."""
        self._closed = True
        account, self._account = self._account, None
        if account is not None:
            await account.detach(self)
        self.on_down("closed")

    # From the account link.

    def on_snapshot(self, attributes: MowerAttributes | None) -> None:
        if attributes is None:
            self.on_down(
                f"the account of credential {self.options.credentials!r} has no mower "
                f"{self.vendor_id!r}"
            )
            return
        if not self._up:
            self._up, self.reason = True, None
            self._events.on_link(True, None)
        self._heard(attributes)

    def on_event(self, event: Event) -> None:
        if self._up and self.last is not None:
            self._heard(event.merged(self.last))

    def on_down(self, reason: str) -> None:
        self.reason = reason
        if self._up:
            self._up = False
            self._events.on_link(False, reason)

    def _heard(self, attributes: MowerAttributes) -> None:
        self.last = attributes
        reg = self.registration
        self._events.on_state(
            mapping.state(
                attributes,
                mower_id=reg.mower_id,
                account_id=reg.account_id,
                now=datetime.now(UTC),
                zone=self._zone,
            )
        )
        for waiter in list(self._waiters):
            waiter.heard = attributes
            found = mapping.judge(waiter.plan, attributes)
            if found is not None and not waiter.future.done():
                waiter.future.set_result(found)

    # Commands.

    async def send(self, envelope: CommandEnvelope, *, timeout: float) -> CommandOutcome:
        """Carry out a command and wait for the events that confirm it."""
        cid = envelope.command_id
        done = self._once.known(cid)
        if done is not None:
            return done  # a redelivery: the first outcome, never a second request
        account, last = self._account, self.last
        if not self._up or account is None or last is None:
            raise LinkDownError(
                f"mower {self.registration.mower_id} is not connected: {self.reason}"
            )
        return await self._once.run(
            cid,
            lambda fut: self._carry_out(account, last, envelope, fut, timeout),
            timeout=timeout,
            timed_out=self._timeout_error,
        )

    async def _carry_out(
        self,
        account: AccountLink,
        last: MowerAttributes,
        envelope: CommandEnvelope,
        fut: asyncio.Future[CommandOutcome],
        timeout: float,
    ) -> CommandOutcome:
        plan = mapping.plan(envelope.command, last, self.options.calendar)
        if isinstance(plan, CommandOutcome):
            return plan
        waiter = _Waiter(plan, fut)
        self._waiters.append(waiter)
        try:
            left = (envelope.expires_at - datetime.now(UTC)).total_seconds()
            bound = max(0.05, min(timeout, left))
            loop = asyncio.get_running_loop()
            end = loop.time() + bound
            path = f"/mowers/{self.vendor_id}/{plan.path}"
            try:
                answer = await asyncio.wait_for(
                    account.request("POST", path, plan.body, urgent=envelope.is_emergency), bound
                )
            except TimeoutError:
                raise self._timeout_error(bound) from None
            if answer.status >= 300:
                text = answer.body[:_SHOWN].decode(errors="replace")
                return CommandOutcome(
                    "failed", f"the API answered {answer.status} to {plan.what}: {text}"
                )
            try:
                return await asyncio.wait_for(asyncio.shield(fut), max(0.05, end - loop.time()))
            except TimeoutError:
                if waiter.heard is None:
                    raise self._timeout_error(bound) from None
                m = waiter.heard.mower
                until = "before the command expired" if left <= timeout else f"in {bound:g} s"
                return CommandOutcome(
                    "failed",
                    f"the mower still reports {m.activity}/{m.state} {until} after {plan.what}",
                )
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _timeout_error(self, timeout: float) -> CommandTimeoutError:
        return CommandTimeoutError(
            f"mower {self.registration.mower_id}: no event from the Automower Connect API "
            f"within {timeout:g} s"
        )
