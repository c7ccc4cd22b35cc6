"""The OpenFGA adapter: the ``Authorizer`` port over the async ``openfga-sdk`` client."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar, cast

import aiohttp
from openfga_sdk.client import ClientConfiguration, OpenFgaClient
from openfga_sdk.client.models import (
    ClientBatchCheckItem,
    ClientBatchCheckRequest,
    ClientCheckRequest,
    ClientListObjectsRequest,
    ClientTuple,
    ClientWriteRequest,
)
from openfga_sdk.client.models.write_conflict_opts import (
    ClientWriteRequestOnDuplicateWrites,
    ClientWriteRequestOnMissingDeletes,
    ConflictOptions,
)
from openfga_sdk.credentials import CredentialConfiguration, Credentials
from openfga_sdk.exceptions import ApiException, FgaValidationException, OpenApiException
from openfga_sdk.models import ReadRequestTupleKey

from mowdeck.authz._tuples import AuthzError, AuthzUnavailableError, InvalidTupleError, Tuple

__all__ = ["OpenFgaAuthorizer", "openfga_client"]

T = TypeVar("T")
# OpenFGA's server-side limit on checks in one /batch-check request (maxChecksPerBatchCheck).
BATCH_SIZE = 50
_PAGE_SIZE = 100
_IDEMPOTENT: dict[str, Any] = {
    "conflict": ConflictOptions(
        on_duplicate_writes=ClientWriteRequestOnDuplicateWrites.IGNORE,
        on_missing_deletes=ClientWriteRequestOnMissingDeletes.IGNORE,
    )
}


def openfga_client(
    api_url: str, store_id: str, model_id: str | None = None, api_token: str | None = None
) -> OpenFgaClient:
    """An ``OpenFgaClient`` for one store (and model, when given)."""
    credentials = None
    if api_token:
        credentials = Credentials(
            method="api_token", configuration=CredentialConfiguration(api_token=api_token)
        )
    config = ClientConfiguration(
        api_url=api_url,
        store_id=store_id,
        authorization_model_id=model_id or None,
        credentials=credentials,
    )
    return OpenFgaClient(config)


async def _call(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except ApiException as err:
        status = getattr(err, "status", None)
        if status is not None and 400 <= status < 500 and status not in (401, 403, 429):
            raise InvalidTupleError(f"OpenFGA refused the request ({status}): {err.body}") from err
        raise AuthzUnavailableError(f"OpenFGA failed ({status})") from err
    except FgaValidationException as err:
        raise InvalidTupleError(f"OpenFGA client refused the request: {err}") from err
    except (OpenApiException, aiohttp.ClientError, OSError, TimeoutError) as err:
        raise AuthzUnavailableError(f"OpenFGA unreachable: {err}") from err


def _client_tuples(tuples: Sequence[Tuple]) -> list[ClientTuple] | None:
    return [ClientTuple(user=t.user, relation=t.relation, object=t.object) for t in tuples] or None


class OpenFgaAuthorizer:
    """The ``Authorizer`` port answered by an OpenFGA server."""

    def __init__(self, client: OpenFgaClient) -> None:
        self._client = client

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object`` (``POST /check``)."""
        body = ClientCheckRequest(user=user, relation=relation, object=object)
        response: Any = await _call(self._client.check(body))
        return bool(response.allowed)

    async def check_many(self, users: Sequence[str], relation: str, object: str) -> dict[str, bool]:
        """Many users on one object in one ``POST /batch-check`` (per 50 users)."""
        answers = await self.check_pairs([(u, object) for u in users], relation)
        return {user: answers[(user, object)] for user in users}

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        """Many ``(user, object)`` pairs in one ``POST /batch-check`` (per 50 pairs)."""
        if not pairs:
            return {}
        distinct = list(dict.fromkeys(pairs))
        items = [
            ClientBatchCheckItem(user=u, relation=relation, object=o, correlation_id=str(i))
            for i, (u, o) in enumerate(distinct)
        ]
        response: Any = await _call(
            self._client.batch_check(
                ClientBatchCheckRequest(checks=items), options={"max_batch_size": BATCH_SIZE}
            )
        )
        answers: dict[tuple[str, str], bool] = {}
        for single in response.result:
            if single.error is not None:
                raise AuthzUnavailableError(f"OpenFGA batch check failed: {single.error}")
            answers[distinct[int(single.correlation_id)]] = bool(single.allowed)
        missing = set(distinct) - set(answers)
        if missing:
            raise AuthzError(f"OpenFGA answered no decision for {sorted(missing)}")
        return answers

    async def list_objects(self, user: str, relation: str, type: str) -> set[str]:
        """The objects of ``type`` on which ``user`` has ``relation`` (``POST /list-objects``)."""
        body = ClientListObjectsRequest(user=user, relation=relation, type=type)
        response: Any = await _call(self._client.list_objects(body))
        return set(response.objects or [])

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """One transactional ``POST /write``; duplicates and missing deletes are ignored."""
        if not writes and not deletes:
            return
        body = ClientWriteRequest(writes=_client_tuples(writes), deletes=_client_tuples(deletes))
        await _call(self._client.write(body, options=cast(Any, dict(_IDEMPOTENT))))

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Stored tuples matching the filter, every page of ``POST /read``."""
        key = ReadRequestTupleKey(  # type: ignore[no-untyped-call] # untyped generated model
            user=user, relation=relation, object=object
        )
        found: list[Tuple] = []
        token: str | None = None
        while True:
            options: dict[str, Any] = {"page_size": _PAGE_SIZE}
            if token:
                options["continuation_token"] = token
            page: Any = await _call(self._client.read(key, options=options))
            found.extend(Tuple(t.key.user, t.key.relation, t.key.object) for t in page.tuples)
            token = page.continuation_token
            if not token:
                return sorted(found, key=lambda t: (t.object, t.relation, t.user))

    async def delete_object(self, object: str) -> int:
        """Read every tuple of ``object``, then delete them (in writes of 100)."""
        tuples = await self.read(object=object)
        for start in range(0, len(tuples), _PAGE_SIZE):
            await self.write((), tuples[start : start + _PAGE_SIZE])
        return len(tuples)

    def invalidate(self) -> None:
        """Nothing cached here; OpenFGA's own check cache is the server's business."""

    async def close(self) -> None:
        """Close the client's HTTP session."""
        await self._client.close()  # type: ignore[no-untyped-call] # untyped in the SDK
