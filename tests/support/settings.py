"""Settings of tests that the environment decides, as it decides a service's."""

from __future__ import annotations

import os

from mowdeck.kit.settings import BaseSettings, env_name, load_settings

__all__ = ["fast_path_from_environment"]


def fast_path_from_environment() -> bool:
    """``MOWDECK_NATS_FAST_PATH`` read as ``load_settings`` reads it (CI runs suites with it off).

    Tests build settings objects themselves, which would otherwise leave the variable
    unread; only this one is taken from the environment, so nothing else leaks in.
    """
    name = env_name("nats_fast_path")
    environ = {name: os.environ[name]} if name in os.environ else {}
    return load_settings(BaseSettings, environ).nats_fast_path
