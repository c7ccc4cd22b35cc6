"""The Fleet package's errors, rooted in ``FleetError``."""

from __future__ import annotations

from mowdeck.errors import MowdeckError

__all__ = [
    "AreaRefusedError",
    "BadQueryError",
    "CommandNotFoundError",
    "EndpointTakenError",
    "FleetError",
    "ForbiddenError",
    "InvalidRequestError",
    "MowerExistsError",
    "MowerNotFoundError",
    "SiteNotFoundError",
    "UnstorableError",
    "ValueRefusedError",
    "VersionConflictError",
]


class FleetError(MowdeckError):
    """Root of the Fleet package's errors."""


class InvalidRequestError(FleetError):
    """A request breaks a rule; ``field`` names the offending field (dotted path)."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


class BadQueryError(FleetError):
    """A query parameter is malformed (a 400) or out of the range it may take (a 422,
    ``out_of_range``); ``field`` names the parameter."""

    def __init__(self, field: str, detail: str, *, out_of_range: bool = False) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail
        self.out_of_range = out_of_range


class MowerExistsError(FleetError):
    """A mower with this id is already registered."""


class MowerNotFoundError(FleetError):
    """No mower with this id is registered."""


class EndpointTakenError(FleetError):
    """Another registration holds the device endpoint a connection names.

    Says neither which mower nor which account holds it: the answer is the same whoever
    that is. ``field`` names the option naming the device (dotted, as a 422's).
    """

    def __init__(
        self,
        field: str = "connection.options",
        detail: str = "the device endpoint is registered to another mower",
    ) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


class VersionConflictError(FleetError):
    """The registration changed since it was read (optimistic concurrency)."""


class ForbiddenError(FleetError):
    """The caller may see the mower (or account) but not do this to it."""


class CommandNotFoundError(FleetError):
    """No command with this id was issued to this mower."""


class ValueRefusedError(FleetError):
    """The database refused a value of the request (SQLSTATE class 22, or a value asyncpg
    cannot send): the request's fault, a 422, never an outage."""


class UnstorableError(FleetError):
    """The database refuses the data itself (SQLSTATE class 22): no retry stores it."""


class SiteNotFoundError(FleetError):
    """No site with this id in the caller's account (or none the caller may see)."""


class AreaRefusedError(FleetError):
    """An area of ``PUT /v1/sites/{id}/areas`` is refused: ``index`` and ``name`` name the
    feature (None when the refusal is about the whole collection), ``field`` the path."""

    def __init__(self, field: str, detail: str, index: int | None, name: str | None) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail
        self.index = index
        self.name = name
