"""Settings of the authorization adapters and the factory that picks one."""

from __future__ import annotations

import typing
from collections.abc import Mapping

import asyncpg
import msgspec

from mowdeck.authz._local import LocalAuthorizer
from mowdeck.authz._openfga import OpenFgaAuthorizer, openfga_client
from mowdeck.authz._ports import Authorizer
from mowdeck.authz._postgres import PostgresTupleStore
from mowdeck.kit.settings import SettingsError, load_settings

__all__ = ["AuthzSettings", "build_authorizer", "load_authz_settings"]


class AuthzSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``MOWDECK_AUTHZ`` (``local``|``openfga``) and the OpenFGA connection."""

    authz: typing.Literal["local", "openfga"] = "local"
    openfga_api_url: str = "http://127.0.0.1:8080"
    openfga_store_id: str = ""
    openfga_model_id: str = ""
    openfga_api_token: str | None = None


def load_authz_settings(environ: Mapping[str, str] | None = None) -> AuthzSettings:
    """``AuthzSettings`` from ``MOWDECK_*`` variables."""
    return load_settings(AuthzSettings, environ)


def build_authorizer(settings: AuthzSettings, pool: asyncpg.Pool | None) -> Authorizer:
    """The adapter ``settings.authz`` names: local (tuples in ``pool``'s database) or OpenFGA."""
    if settings.authz == "openfga":
        if not settings.openfga_store_id:
            raise SettingsError("MOWDECK_OPENFGA_STORE_ID is required when MOWDECK_AUTHZ=openfga")
        client = openfga_client(
            settings.openfga_api_url,
            settings.openfga_store_id,
            settings.openfga_model_id or None,
            settings.openfga_api_token,
        )
        return OpenFgaAuthorizer(client)
    if pool is None:
        raise SettingsError("MOWDECK_AUTHZ=local keeps tuples in PostgreSQL: pass a pool")
    return LocalAuthorizer(PostgresTupleStore(pool))
