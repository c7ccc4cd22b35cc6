"""The simulator's Prometheus metrics, read from its fleet when scraped (``/metrics``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from simulator.fleet import SimulatorFleet

__all__ = ["SimulatorMetrics", "simulator_registry"]


class SimulatorMetrics(Collector):
    """Mowers, their links, faults in force and states sent, of one simulated fleet."""

    def __init__(self, fleet: SimulatorFleet) -> None:
        self._fleet = fleet

    def collect(self) -> Iterator[Metric]:
        fleet = self._fleet
        mowers = GaugeMetricFamily("mowdeck_simulator_mowers", "Simulated mowers.")
        mowers.add_metric([], len(fleet.mowers))
        yield mowers
        linked = GaugeMetricFamily(
            "mowdeck_simulator_mowers_connected", "Simulated mowers a gateway holds a link to."
        )
        linked.add_metric([], sum(1 for link in fleet.links if link is not None))
        yield linked
        wall = fleet.clock.wall()
        faulty = GaugeMetricFamily(
            "mowdeck_simulator_mowers_faulted", "Simulated mowers with a fault in force."
        )
        faulty.add_metric([], sum(1 for m in fleet.mowers if m.faults(wall)))
        yield faulty
        sent = CounterMetricFamily(
            "mowdeck_simulator_states_sent", "States sent to the gateways' links."
        )
        sent.add_metric([], fleet.states_sent)
        yield sent
        skipped = CounterMetricFamily(
            "mowdeck_simulator_states_skipped",
            "States not sent because the link's write buffer was full.",
        )
        skipped.add_metric([], fleet.states_skipped)
        yield skipped


def simulator_registry(fleet: SimulatorFleet) -> CollectorRegistry:
    """A registry of ``fleet``'s metrics alone."""
    registry = CollectorRegistry()
    registry.register(SimulatorMetrics(fleet))
    return registry
