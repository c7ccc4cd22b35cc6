"""Commands to mowers and their results (ADR 0009)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec.structs import force_setattr

from contracts.v1._base import AwareDatetime, ContractError, Priority, Struct, utc_field

__all__ = [
    "COMMAND_KINDS",
    "FINAL_STATUSES",
    "Command",
    "CommandBase",
    "CommandEnvelope",
    "CommandResult",
    "CommandStatus",
    "EmergencyStop",
    "ManualDrive",
    "PauseMow",
    "ResumeMow",
    "ReturnToDock",
    "SetBladeHeight",
    "SetSpeed",
    "StartMow",
    "command_kind",
]

CommandStatus = Literal["accepted", "rejected", "executed", "expired", "failed"]
FINAL_STATUSES: frozenset[str] = frozenset({"rejected", "executed", "expired", "failed"})


class CommandBase(Struct, frozen=True, tag_field="kind"):
    """One kind of command; the ``kind`` tag selects the type."""

    emergency: ClassVar[bool] = False


class StartMow(CommandBase, frozen=True, tag="start_mow"):
    """Leave the dock and mow; end the job after ``duration_min`` when given.

    ``work_area`` names one of the site's work areas (``SiteAreas``) to mow in; a mower
    or protocol that cannot keep to one rejects the command with that reason.
    """

    duration_min: Annotated[int, msgspec.Meta(ge=1, le=1440)] | None = None
    work_area: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] | None = None


class PauseMow(CommandBase, frozen=True, tag="pause_mow"):
    """Pause the running job where the mower stands."""


class ResumeMow(CommandBase, frozen=True, tag="resume_mow"):
    """Resume a paused or stopped job."""


class ReturnToDock(CommandBase, frozen=True, tag="return_to_dock"):
    """Drive back to the dock and charge."""


class EmergencyStop(CommandBase, frozen=True, tag="emergency_stop"):
    """Stop blades and wheels at once; the mower stays stopped until commanded again."""

    emergency: ClassVar[bool] = True
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


class SetBladeHeight(CommandBase, frozen=True, tag="set_blade_height"):
    """Set the cutting height in millimetres."""

    height_mm: Annotated[int, msgspec.Meta(ge=20, le=100)]


class SetSpeed(CommandBase, frozen=True, tag="set_speed"):
    """Set the mowing speed in metres per second."""

    speed_mps: Annotated[float, msgspec.Meta(ge=0.1, le=1.5)]


class ManualDrive(CommandBase, frozen=True, tag="manual_drive"):
    """Drive by hand; the mower stops unless another drive arrives within ``ttl_ms``."""

    linear_mps: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)]
    angular_rps: Annotated[float, msgspec.Meta(ge=-2.0, le=2.0)]
    ttl_ms: Annotated[int, msgspec.Meta(ge=100, le=2000)] = 1000


Command = (
    StartMow
    | PauseMow
    | ResumeMow
    | ReturnToDock
    | EmergencyStop
    | SetBladeHeight
    | SetSpeed
    | ManualDrive
)
COMMAND_KINDS: tuple[str, ...] = (
    "start_mow",
    "pause_mow",
    "resume_mow",
    "return_to_dock",
    "emergency_stop",
    "set_blade_height",
    "set_speed",
    "manual_drive",
)


def command_kind(command: CommandBase) -> str:
    """The ``kind`` tag of a command."""
    return type(command).__struct_config__.tag  # type: ignore[return-value]


class CommandEnvelope(Struct, frozen=True):
    """A command addressed to one mower, with identity, expiry and priority.

    Rules across fields (a decoder refuses a message that breaks one):
    - ``expires_at`` is strictly after ``issued_at``;
    - ``priority`` may be ``emergency`` only when ``command.kind`` is ``emergency_stop``;
      it is derived from the command when omitted, and an ``emergency_stop`` is always
      ``emergency`` (a ``normal`` one is raised).
    """

    command_id: uuid.UUID
    mower_id: uuid.UUID
    account_id: uuid.UUID
    issued_by: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    issued_at: AwareDatetime
    expires_at: AwareDatetime
    command: Command
    priority: Priority | None = None
    correlation_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        utc_field(self, "issued_at")
        utc_field(self, "expires_at")
        if self.expires_at <= self.issued_at:
            raise ContractError("`expires_at` must be after `issued_at`")
        derived: Priority = "emergency" if self.command.emergency else "normal"
        if self.priority == "emergency" and derived != "emergency":
            raise ContractError(
                "`priority` may be `emergency` only for an `emergency_stop` command"
            )
        # Derived when omitted; an emergency stop cannot be downgraded by a client.
        if self.priority != derived:
            force_setattr(self, "priority", derived)

    @property
    def kind(self) -> str:
        """The command's kind tag."""
        return command_kind(self.command)

    @property
    def is_emergency(self) -> bool:
        """True for an emergency stop."""
        return self.priority == "emergency"

    def is_expired(self, now: datetime) -> bool:
        """True when the command must no longer be executed at ``now``."""
        return now >= self.expires_at

    @classmethod
    def issue(
        cls,
        *,
        mower_id: uuid.UUID,
        account_id: uuid.UUID,
        command: Command,
        issued_by: str,
        now: datetime,
        ttl: timedelta = timedelta(seconds=30),
        correlation_id: uuid.UUID | None = None,
        command_id: uuid.UUID | None = None,
    ) -> CommandEnvelope:
        """Build a fresh envelope issued at ``now`` that expires after ``ttl``."""
        return cls(
            command_id=command_id or uuid.uuid4(),
            mower_id=mower_id,
            account_id=account_id,
            issued_by=issued_by,
            issued_at=now,
            expires_at=now + ttl,
            command=command,
            correlation_id=correlation_id,
        )


class CommandResult(Struct, frozen=True):
    """One status transition of a command, published by the Device-Gateway."""

    command_id: uuid.UUID
    mower_id: uuid.UUID
    status: CommandStatus
    at: AwareDatetime
    reason: Annotated[str, msgspec.Meta(max_length=1000)] | None = None
    # The kind of the command (added in v1.1: older publishers leave it out).
    kind: Annotated[str, msgspec.Meta(max_length=64)] | None = None

    def __post_init__(self) -> None:
        utc_field(self, "at")

    @property
    def msg_id(self) -> str:
        """The de-duplication id of this result: ``<command_id>:<status>``."""
        return f"{self.command_id}:{self.status}"

    @property
    def is_final(self) -> bool:
        """True for a status after which no other follows."""
        return self.status in FINAL_STATUSES
