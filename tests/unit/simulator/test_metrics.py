"""The simulator's /metrics: mowers, links, faults and states of its fleet."""

from __future__ import annotations

from prometheus_client import generate_latest

from simulator.faults import StuckFault
from simulator.fleet import FleetConfig, SimulatorFleet
from simulator.metrics import simulator_registry


async def test_the_figures_are_the_fleet_s_own_when_scraped() -> None:
    fleet = SimulatorFleet(FleetConfig(mowers=3, seed=1))
    registry = simulator_registry(fleet)
    text = generate_latest(registry).decode()
    assert "mowdeck_simulator_mowers 3.0" in text
    assert "mowdeck_simulator_mowers_connected 0.0" in text
    assert "mowdeck_simulator_mowers_faulted 0.0" in text
    assert "mowdeck_simulator_states_sent_total 0.0" in text
    await fleet.inject(fleet.mowers[0].mower_id, StuckFault())
    fleet.states_sent = 5
    text = generate_latest(registry).decode()
    assert "mowdeck_simulator_mowers_faulted 1.0" in text
    assert "mowdeck_simulator_states_sent_total 5.0" in text
