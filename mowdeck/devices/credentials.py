"""Credential references: a connection names a secret, never holds it (ADR 0013).

Fleet checks only that a name is well formed; the gateway reads the secret from
``MOWDECK_GATEWAY_CREDENTIALS_DIR/<name>.json`` when it dials
(``mowdeck/gateway/connections/credentials.py``). The name is a file name: no path
separator, no leading dot, so it cannot reach outside that directory.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["CREDENTIAL_NAME_PATTERN", "CredentialName"]

CREDENTIAL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

CredentialName = Annotated[str, msgspec.Meta(pattern=CREDENTIAL_NAME_PATTERN)]
