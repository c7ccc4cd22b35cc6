"""Structured logging: JSON lines in production, a readable console on a terminal."""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

import structlog

__all__ = ["configure_logging"]


def _colours() -> bool:
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


def configure_logging(
    level: str = "info", fmt: Literal["auto", "json", "console"] = "auto"
) -> None:
    """Route structlog and stdlib logging through one renderer (call once at start)."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
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
