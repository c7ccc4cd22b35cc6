"""Realtime: live mower states, command results, links and notifications over SSE and WebSocket."""

from mowdeck.realtime.service import RealtimeService
from mowdeck.realtime.settings import RealtimeSettings, load_realtime_settings

__all__ = ["RealtimeService", "RealtimeSettings", "load_realtime_settings"]
