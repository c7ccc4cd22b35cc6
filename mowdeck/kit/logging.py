"""Structured logging: JSON lines in production, a readable console on a terminal.

Who a line is about comes from structlog's context variables, merged into every line
(``merge_contextvars``), so that the lines of services sharing one process (the demo)
can be told apart and filtered:

- ``service`` is bound while a service starts and stops (``ServiceShell``, ``start_all``
  and ``stop_all``). asyncio copies the context into every task, timer and callback it
  creates, so what a service starts then carries its name for good: its consumers'
  tasks, its HTTP server's connections and requests, its timers. A thread starts with an
  empty context: a service's threads run in a copy of the context that started them (the
  actor dispatcher's workers, the gateway's emergency lane).
- The mower, command and account a message or request names (``MESSAGE_KEYS``) are
  bound on the path that handles it: ``bound(...)`` for a block; ``bind(...)`` for the
  rest of a message's scope, which ends with the message (the kit's ``settle`` opens one
  per message, and aiohttp runs each request in a task of its own).
- What is created inside such a binding inherits it. A task or timer that serves every
  message but happens to be started from one message's path (a batch's writer) is
  created in ``service_context()``, or it would carry that message's ids for good.

Ids are bound as they are (a ``UUID``, not its text) and written as text by the
renderers: a binding on a hot path costs no formatting, only the lines written do.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import sys
import uuid
from contextlib import AbstractContextManager
from typing import Any, Final, Literal

import structlog
from structlog.typing import EventDict, WrappedLogger

__all__ = [
    "MESSAGE_KEYS",
    "bind",
    "bound",
    "configure_logging",
    "ids_as_text",
    "message_scope",
    "service_context",
]

MESSAGE_KEYS: Final = ("mower_id", "command_id", "account_id")
"""What a message names, bound while it is handled; unset again when its scope ends."""

# structlog keeps one context variable per key; taken from the token it returns, once per
# key, so that a binding is a ``set`` and a ``reset`` and nothing more.
_VARS: dict[str, contextvars.ContextVar[Any]] = {}


def _var(key: str) -> contextvars.ContextVar[Any]:
    var = _VARS.get(key)
    if var is None:
        token = structlog.contextvars.bind_contextvars(**{key: ...})[key]
        var = token.var
        var.reset(token)
        _VARS[key] = var
    return var


class _Bound:
    """Binds its values on entry and puts back what was bound before on exit."""

    __slots__ = ("_tokens", "_values")

    def __init__(self, values: dict[contextvars.ContextVar[Any], Any]) -> None:
        self._values = values
        self._tokens: list[tuple[contextvars.ContextVar[Any], contextvars.Token[Any]]] = []

    def __enter__(self) -> None:
        self._tokens = [(var, var.set(v)) for var, v in self._values.items()]

    def __exit__(self, *_: object) -> None:
        for var, token in reversed(self._tokens):
            var.reset(token)


def bound(**values: Any) -> AbstractContextManager[None]:
    """Bind ``values`` to the lines logged inside the block and to what is created there."""
    return _Bound({_var(key): value for key, value in values.items()})


class _MessageScope:
    """Unbinds ``MESSAGE_KEYS`` for the block; puts back what was bound before on exit.

    Only what differs is set: a message whose handler binds nothing, in a scope nothing
    was bound around (every consumer's), costs six reads and no write. (The three keys
    are spelt out: a loop over them costs as much again, per message.)
    """

    __slots__ = ("_account", "_command", "_mower")

    def __enter__(self) -> None:
        mower, command, account = _message_vars()
        self._mower, self._command, self._account = mower.get(), command.get(), account.get()
        if self._mower is not ... or self._command is not ... or self._account is not ...:
            mower.set(...)
            command.set(...)
            account.set(...)

    def __exit__(self, *_: object) -> None:
        mower, command, account = _message_vars()
        if mower.get() is not self._mower:
            mower.set(self._mower)
        if command.get() is not self._command:
            command.set(self._command)
        if account.get() is not self._account:
            account.set(self._account)


@functools.cache
def _message_vars() -> tuple[contextvars.ContextVar[Any], ...]:
    return tuple(map(_var, MESSAGE_KEYS))


def message_scope() -> AbstractContextManager[None]:
    """A block whose end unbinds what was bound inside it of ``MESSAGE_KEYS``.

    It starts with none of them bound: a message handled inside tells only of itself.
    """
    return _MessageScope()


def bind(**values: Any) -> None:
    """Bind ``values`` for the rest of the current scope: a request, or a ``message_scope``."""
    for key, value in values.items():
        _var(key).set(value)


def _unbind_message() -> None:
    for key in MESSAGE_KEYS:
        _var(key).set(...)


def service_context() -> contextvars.Context:
    """The current context without the bindings of the message at hand.

    For a task or timer serving every message that is started from one message's path:
    ``loop.create_task(coro, context=service_context())``.
    """
    context = contextvars.copy_context()
    context.run(_unbind_message)
    return context


def ids_as_text(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Write ``UUID`` values as their text (bindings keep them as they are)."""
    for key, value in event_dict.items():
        if type(value) is uuid.UUID:
            event_dict[key] = str(value)
    return event_dict


def _colours() -> bool:
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


def configure_logging(
    level: str = "info", fmt: Literal["auto", "json", "console"] = "auto"
) -> None:
    """Route structlog and stdlib logging through one renderer (call once at start)."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        ids_as_text,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: structlog.types.Processor
    if use_console:
        # Colour codes only for a terminal: in a file or a pipe they are noise to read.
        renderer = structlog.dev.ConsoleRenderer(colors=_colours())
    else:
        shared.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        # Level first: a debug call on a hot path costs one isEnabledFor when debug is off.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Library chatter below warning is noise in a fleet's logs.
    for noisy in ("asyncio", "aiohttp.access", "nats"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
