"""A Mosquitto broker per test and a stand-in OpenMower on it."""

from tests.support.openmower import broker, openmower

__all__ = ["broker", "openmower"]
