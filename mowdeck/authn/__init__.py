"""Authentication: JWT bearer tokens verified against configured keys."""

from mowdeck.authn._denylist import (
    Denial,
    DenyList,
    JetStreamDenyList,
    MemoryDenyList,
    create_denylist_bucket,
    running_denylist,
)
from mowdeck.authn._keys import ALGORITHMS
from mowdeck.authn._middleware import PRINCIPAL, auth_middleware, principal
from mowdeck.authn._settings import AuthSettings, load_auth_settings
from mowdeck.authn._tokens import AuthenticationError, Principal, TokenIssuer, TokenVerifier

__all__ = [
    "ALGORITHMS",
    "PRINCIPAL",
    "AuthSettings",
    "AuthenticationError",
    "Denial",
    "DenyList",
    "JetStreamDenyList",
    "MemoryDenyList",
    "Principal",
    "TokenIssuer",
    "TokenVerifier",
    "auth_middleware",
    "create_denylist_bucket",
    "load_auth_settings",
    "principal",
    "running_denylist",
]
