"""Authorization: the OpenFGA model in this folder, one port, two adapters."""

from mowdeck.authz._decisions import DecisionCache
from mowdeck.authz._local import LocalAuthorizer
from mowdeck.authz._memory import InMemoryTupleStore
from mowdeck.authz._model import AuthorizationModel, load_model
from mowdeck.authz._openfga import OpenFgaAuthorizer, openfga_client
from mowdeck.authz._ports import Authorizer, TupleStore
from mowdeck.authz._postgres import PostgresTupleStore
from mowdeck.authz._settings import AuthzSettings, build_authorizer, load_authz_settings
from mowdeck.authz._tuples import (
    AuthzError,
    AuthzUnavailableError,
    InvalidTupleError,
    Tuple,
    account_object,
    group_object,
    mower_object,
    site_object,
    user_ref,
)
from mowdeck.authz.roles import ROLES, Role, grant_tuples, revoke_tuples

__all__ = [
    "ROLES",
    "AuthorizationModel",
    "Authorizer",
    "AuthzError",
    "AuthzSettings",
    "AuthzUnavailableError",
    "DecisionCache",
    "InMemoryTupleStore",
    "InvalidTupleError",
    "LocalAuthorizer",
    "OpenFgaAuthorizer",
    "PostgresTupleStore",
    "Role",
    "Tuple",
    "TupleStore",
    "account_object",
    "build_authorizer",
    "grant_tuples",
    "group_object",
    "load_authz_settings",
    "load_model",
    "mower_object",
    "openfga_client",
    "revoke_tuples",
    "site_object",
    "user_ref",
]
