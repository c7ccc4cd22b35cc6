"""Telemetry: latest states, history, tracks and command timelines (ADR 0017)."""

from mowdeck.telemetry.errors import TelemetryError
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import TelemetrySettings, load_telemetry_settings

__all__ = ["TelemetryError", "TelemetryService", "TelemetrySettings", "load_telemetry_settings"]
