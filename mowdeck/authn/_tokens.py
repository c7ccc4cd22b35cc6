"""Bearer tokens: verify one into a ``Principal``, or mint one for development."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt
import msgspec

from mowdeck.authn._keyring import KeyRing
from mowdeck.authn._keys import signing_key
from mowdeck.authn._settings import AuthSettings
from mowdeck.errors import MowdeckError

__all__ = ["AuthenticationError", "Principal", "TokenIssuer", "TokenVerifier"]


class AuthenticationError(MowdeckError):
    """A request's token is missing or not acceptable; ``reason`` is a short code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: the token's ``sub`` and ``account_id``."""

    user_id: str
    account_id: uuid.UUID


# PyJWT's errors by what they mean to a client; order matters (subclasses first).
_REASONS: tuple[tuple[type[jwt.PyJWTError], str, str], ...] = (
    (jwt.ExpiredSignatureError, "expired", "the token has expired"),
    (jwt.ImmatureSignatureError, "not-yet-valid", "the token is not valid yet"),
    (jwt.MissingRequiredClaimError, "missing-claim", "the token lacks a required claim"),
    (jwt.InvalidIssuerError, "issuer", "the token's issuer is not accepted"),
    (jwt.InvalidAudienceError, "audience", "the token's audience is not accepted"),
    (jwt.InvalidSignatureError, "signature", "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "algorithm", "the token's algorithm is not accepted"),
    (jwt.DecodeError, "malformed", "the token is not a well-formed JWT"),
)


def _translate(err: jwt.PyJWTError) -> AuthenticationError:
    for kind, reason, detail in _REASONS:
        if isinstance(err, kind):
            extra = f" ({err})" if reason == "missing-claim" else ""
            return AuthenticationError(reason, detail + extra)
    return AuthenticationError("invalid", "the token is not acceptable")


class TokenVerifier:
    """Checks bearer tokens against the keys and algorithms of ``AuthSettings``.

    Key files are re-read when they change (``KeyRing``); ``clock`` is monotonic seconds.
    """

    def __init__(
        self, settings: AuthSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ring = KeyRing(settings, clock)
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience
        self._leeway = settings.jwt_leeway_seconds
        required = ["exp", "sub", "account_id"]
        required += ["iss"] if self._issuer else []
        required += ["aud"] if self._audience else []
        self._required = required

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms a token may be signed with."""
        return tuple(self._ring.keys())

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; raises ``AuthenticationError`` otherwise."""
        if not token:
            raise AuthenticationError("missing", "no bearer token was sent")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as err:
            raise AuthenticationError("malformed", "the token is not a well-formed JWT") from err
        alg, kid = header.get("alg"), header.get("kid")
        accepted = self._ring.keys()
        if not isinstance(alg, str) or alg not in accepted:
            raise AuthenticationError("algorithm", f"the algorithm {alg!r} is not accepted")
        keys = [k for k in accepted[alg] if kid is None or k.kid is None or k.kid == kid]
        if not keys:
            raise AuthenticationError("unknown-key", f"no key {kid!r} is configured")
        claims: dict[str, Any] | None = None
        for candidate in keys:
            try:
                claims = jwt.decode(
                    token,
                    candidate.key,
                    algorithms=[alg],
                    audience=self._audience,
                    issuer=self._issuer,
                    leeway=self._leeway,
                    options={"require": self._required, "verify_aud": bool(self._audience)},
                )
                break
            except jwt.InvalidSignatureError as err:
                last: jwt.PyJWTError = err
            except jwt.PyJWTError as err:
                raise _translate(err) from err
        if claims is None:
            raise _translate(last)
        return _principal(claims)


def _principal(claims: dict[str, Any]) -> Principal:
    sub, account = claims.get("sub"), claims.get("account_id")
    if not isinstance(sub, str) or not sub.strip():
        raise AuthenticationError("claims", "the token's sub is empty")
    try:
        account_id = uuid.UUID(str(account)) if isinstance(account, str) else None
    except ValueError:
        account_id = None
    if account_id is None:
        raise AuthenticationError("claims", "the token's account_id is not a UUID")
    return Principal(sub, account_id)


class TokenIssuer:
    """Mints tokens the ``TokenVerifier`` of the same settings accepts (development)."""

    def __init__(self, settings: AuthSettings) -> None:
        self._key = signing_key(settings)
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience

    @property
    def algorithm(self) -> str:
        """The algorithm tokens are signed with."""
        return self._key.algorithm

    def mint(
        self, user_id: str, account_id: uuid.UUID, ttl_s: float = 3600, *, now: float | None = None
    ) -> str:
        """A signed token for ``user_id`` in ``account_id``, valid ``ttl_s`` seconds."""
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        if not user_id:
            raise ValueError("user_id must not be empty")
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "sub": user_id,
            "account_id": str(account_id),
            "iat": issued,
            "exp": issued + int(ttl_s),
            "jti": uuid.uuid4().hex,
        }
        if self._issuer:
            claims["iss"] = self._issuer
        if self._audience:
            claims["aud"] = self._audience
        headers = {"kid": self._key.kid} if self._key.kid else None
        return jwt.encode(claims, self._key.key, algorithm=self._key.algorithm, headers=headers)
