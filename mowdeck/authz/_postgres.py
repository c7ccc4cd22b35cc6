"""Tuples in PostgreSQL (``sql/authz``), so every service's evaluator sees the same grants."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import asyncpg

from mowdeck.authz._ports import TupleStore
from mowdeck.authz._tuples import AuthzUnavailableError, Tuple, split_object

__all__ = ["PostgresTupleStore"]

_COLUMNS = "object_type, object_id, relation, subject"


def _columns(tuples: Sequence[Tuple]) -> tuple[list[str], list[str], list[str], list[str]]:
    types, ids, relations, subjects = [], [], [], []
    for t in tuples:
        kind, ident = split_object(t.object)
        types.append(kind)
        ids.append(ident)
        relations.append(t.relation)
        subjects.append(t.user)
    return types, ids, relations, subjects


def _tuple(row: asyncpg.Record) -> Tuple:
    return Tuple(row["subject"], row["relation"], f"{row['object_type']}:{row['object_id']}")


class PostgresTupleStore(TupleStore):
    """A ``TupleStore`` on the table ``authz_tuples``; the pool is the caller's."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Remove ``deletes`` and add ``writes`` in one transaction."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                if deletes:
                    await conn.execute(
                        "DELETE FROM authz_tuples t USING"
                        " unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS d(ot, oi, r, s)"
                        " WHERE t.object_type = d.ot AND t.object_id = d.oi"
                        " AND t.relation = d.r AND t.subject = d.s",
                        *_columns(deletes),
                    )
                if writes:
                    await conn.execute(
                        "INSERT INTO authz_tuples (object_type, object_id, relation, subject)"
                        " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])"
                        " ON CONFLICT DO NOTHING",
                        *_columns(writes),
                    )
        except (asyncpg.PostgresError, OSError) as err:
            raise AuthzUnavailableError(f"tuple store: {err}") from err

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Tuples matching every given filter, sorted by object, relation and user."""
        where: list[str] = []
        args: list[Any] = []
        if object is not None:
            kind, _, ident = object.partition(":")
            args.append(kind)
            where.append(f"object_type = ${len(args)}")
            if ident:
                args.append(ident)
                where.append(f"object_id = ${len(args)}")
        if relation is not None:
            args.append(relation)
            where.append(f"relation = ${len(args)}")
        if user is not None:
            args.append(user)
            where.append(f"subject = ${len(args)}")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM authz_tuples{clause}"  # noqa: S608 - only placeholders
            " ORDER BY object_type, object_id, relation, subject",
            *args,
        )
        return [_tuple(r) for r in rows]

    async def contains_any(self, object: str, relation: str, users: Collection[str]) -> bool:
        """Whether ``object#relation`` holds any of ``users``."""
        kind, ident = split_object(object)
        rows = await self._fetch(
            "SELECT 1 FROM authz_tuples WHERE object_type = $1 AND object_id = $2"
            " AND relation = $3 AND subject = ANY($4::text[]) LIMIT 1",
            kind,
            ident,
            relation,
            list(users),
        )
        return bool(rows)

    async def usersets(self, object: str, relation: str) -> list[str]:
        """The userset users on ``object#relation``."""
        kind, ident = split_object(object)
        rows = await self._fetch(
            "SELECT subject FROM authz_tuples WHERE object_type = $1 AND object_id = $2"
            " AND relation = $3 AND is_userset ORDER BY subject",
            kind,
            ident,
            relation,
        )
        return [r["subject"] for r in rows]

    async def objects_with(self, type: str, relation: str, users: Collection[str]) -> set[str]:
        """Objects of ``type`` whose ``relation`` holds any of ``users``."""
        rows = await self._fetch(
            "SELECT DISTINCT object_id FROM authz_tuples WHERE object_type = $1"
            " AND relation = $2 AND subject = ANY($3::text[])",
            type,
            relation,
            list(users),
        )
        return {f"{type}:{r['object_id']}" for r in rows}

    async def object_tuples(
        self, objects: Collection[str], users: Collection[str], relations: Collection[str]
    ) -> list[Tuple]:
        """The tuples on ``objects`` for ``users``, usersets or ``relations``, in one query."""
        kinds, idents = [], []
        for o in objects:
            kind, ident = split_object(o)
            kinds.append(kind)
            idents.append(ident)
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM authz_tuples t"  # noqa: S608 - only placeholders
            " JOIN unnest($1::text[], $2::text[]) AS o(ot, oi)"
            " ON t.object_type = o.ot AND t.object_id = o.oi"
            " WHERE t.subject = ANY($3::text[]) OR t.is_userset OR t.relation = ANY($4::text[])",
            kinds,
            idents,
            list(users),
            list(relations),
        )
        return [_tuple(r) for r in rows]

    async def delete_object(self, object: str) -> int:
        """Remove the tuples whose object is ``object``."""
        kind, ident = split_object(object)
        try:
            status = await self._pool.execute(
                "DELETE FROM authz_tuples WHERE object_type = $1 AND object_id = $2", kind, ident
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise AuthzUnavailableError(f"tuple store: {err}") from err
        return int(status.rsplit(" ", 1)[-1])

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self._pool.fetch(query, *args)
        except (asyncpg.PostgresError, OSError) as err:
            raise AuthzUnavailableError(f"tuple store: {err}") from err
        return rows
