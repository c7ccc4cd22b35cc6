"""A Mosquitto broker per test and a stand-in OpenMower on it."""

from tests.support.openmower import broker, mower

__all__ = ["broker", "mower"]
