"""``compose.yaml`` checked without Docker: commands, settings, dependencies, bus users.

Every ``mowdeck <command>`` a container runs exists; every ``MOWDECK_*`` variable it sets
is a setting some part reads; every service is health-checked or a one-shot job the
others wait for; every Mowdeck container runs as the bus user of what it runs, and that
user is in the permission table ``mowdeck nats-config`` writes; the three NATS nodes run
the configurations it writes.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

import mowdeck
from mowdeck.cli import commands
from mowdeck.commands.nats_config import write_config
from mowdeck.kit.bus_permissions import user
from mowdeck.kit.settings import env_name

COMPOSE = Path(__file__).parents[2] / "compose.yaml"
SOURCE = Path(mowdeck.__file__).parent
# The bus user each command connects as (kit/bus_permissions.py).
BUS_USER_OF = {
    "fleet": "fleet",
    "gateway": "gateway",
    "telemetry": "telemetry",
    "notifications": "notifications",
    "realtime": "realtime",
    "streams": "admin",
    "grant": "cli",
    "user": "cli",
}
ONE_SHOT = {"no", "on-failure"}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(loaded["services"])


def _mowdeck_commands(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    text = " ".join(command) if isinstance(command, list) else str(command)
    return re.findall(r"(?:^|[\s;&(])mowdeck ([a-z][a-z-]*)", text)


def _known_settings() -> set[str]:
    """Every ``MOWDECK_*`` variable a settings struct or the code reads."""
    for info in pkgutil.walk_packages([str(SOURCE)], prefix="mowdeck."):
        importlib.import_module(info.name)
    names: set[str] = set()
    pending: list[type] = [msgspec.Struct]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.__name__.endswith("Settings") and cls.__module__.startswith("mowdeck."):
            names |= {env_name(f.encode_name) for f in msgspec.structs.fields(cls)}
    # A few are read directly (MOWDECK_SQL_DIR: where the migrations are).
    for path in SOURCE.rglob("*.py"):
        names |= set(
            re.findall(r"environ(?:\.get\(|\[)\s*\"(MOWDECK_[A-Z0-9_]+)\"", path.read_text())
        )
    return names


def test_every_mowdeck_command_exists(services: dict[str, dict[str, Any]]) -> None:
    known = {name for name, _, _ in commands()}
    used = {c for s in services.values() for c in _mowdeck_commands(s)}
    assert used, "no service runs mowdeck"
    assert used - known == set()
    assert {"fleet", "gateway", "telemetry", "notifications", "realtime", "streams"} <= used


def test_every_mowdeck_variable_is_a_setting(services: dict[str, dict[str, Any]]) -> None:
    known = _known_settings()
    assert {"MOWDECK_NATS_URL", "MOWDECK_STREAM_REPLICAS", "MOWDECK_SHARD_INDEX"} <= known
    unknown = {
        (name, variable)
        for name, service in services.items()
        for variable in (service.get("environment") or {})
        if variable.startswith("MOWDECK_") and variable not in known
    }
    assert unknown == set()


def test_every_service_is_health_checked_or_a_one_shot_the_others_wait_for(
    services: dict[str, dict[str, Any]],
) -> None:
    waited_for = {
        target
        for s in services.values()
        for target, how in (s.get("depends_on") or {}).items()
        if how.get("condition") == "service_completed_successfully"
    }
    for name, service in services.items():
        health = service.get("healthcheck") or {}
        checked = bool(health) and not health.get("disable", False)
        one_shot = service.get("restart") in ONE_SHOT and name in waited_for
        assert checked or one_shot, name
        assert not (checked and one_shot), name
        for target, how in (service.get("depends_on") or {}).items():
            assert target in services, (name, target)
            condition = how["condition"]
            if condition == "service_healthy":
                assert not services[target].get("healthcheck", {}).get("disable"), (name, target)
            if condition == "service_completed_successfully":
                assert target in waited_for and services[target].get("restart") in ONE_SHOT
        if _mowdeck_commands(service) and name != "nats-config":
            assert service.get("depends_on"), name  # NATS, PostgreSQL or a job first


def test_every_bus_client_runs_as_its_own_user_of_the_permission_table(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, service in services.items():
        wanted = {BUS_USER_OF[c] for c in _mowdeck_commands(service) if c in BUS_USER_OF}
        bus_user = (service.get("environment") or {}).get("BUS_USER")
        assert wanted == ({bus_user} if bus_user else set()), name
        if bus_user:
            assert user(bus_user).name == bus_user
            assert "MOWDECK_NATS_USER" not in service["environment"]  # from its own file


def test_the_cluster_runs_three_nodes_of_the_generated_configuration(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    [generate] = [s for s in services.values() if _mowdeck_commands(s) == ["nats-config"]]
    argv = generate["command"][generate["command"].index("nats-config") + 1 :]
    parser = argparse.ArgumentParser()
    from mowdeck.commands.nats_config import configure  # noqa: PLC0415 - its own parser

    configure(parser)
    args = parser.parse_args(argv)
    folder = args.dir
    args.dir = tmp_path
    written = {p.name for p in write_config(args)}
    nodes = {n: s for n, s in services.items() if n.startswith("nats-") and n != "nats-config"}
    assert sorted(nodes) == ["nats-0", "nats-1", "nats-2"]
    for node_name, node in nodes.items():
        [config] = [c for c in node["command"] if c.endswith(".conf")]
        assert Path(config).parent == Path(folder)
        assert Path(config).name in written
        text = (tmp_path / Path(config).name).read_text()
        assert f'server_name: "{node_name}"' in text
        assert all(f"nats-route://{other}:6222" in text for other in nodes)
    for bus_user in {BUS_USER_OF[c] for c in BUS_USER_OF}:
        assert f"{bus_user}.env" in written
    env = services["fleet"]["environment"]
    assert env["MOWDECK_STREAM_REPLICAS"] == "3"
    assert env["MOWDECK_NATS_URL"].split(",") == [f"nats://{n}:4222" for n in sorted(nodes)]


def test_prometheus_scrapes_every_mowdeck_service_and_loads_the_rules(
    services: dict[str, dict[str, Any]],
) -> None:
    prometheus = services["prometheus"]
    mounts = {
        target: source for source, target, *_ in (v.split(":") for v in prometheus["volumes"])
    }
    config = yaml.safe_load((COMPOSE.parent / mounts["/etc/prometheus/prometheus.yml"]).read_text())
    targets = {
        t for job in config["scrape_configs"] for s in job["static_configs"] for t in s["targets"]
    }
    serving = {
        name
        for name, service in services.items()
        if _mowdeck_commands(service) and not (service.get("healthcheck") or {}).get("disable")
    }
    assert {t.split(":")[0] for t in targets} == serving
    assert "fleet:8080" in targets and "simulator:8765" in targets
    [rules] = config["rule_files"]
    assert mounts[str(Path(rules).parent)] == "./deploy/prometheus/rules"


def test_grafana_is_provisioned_with_the_prometheus_and_the_committed_dashboards(
    services: dict[str, dict[str, Any]],
) -> None:
    grafana = services["grafana"]
    mounts = {target: source for source, target, *_ in (v.split(":") for v in grafana["volumes"])}
    provisioning = COMPOSE.parent / mounts["/etc/grafana/provisioning"]
    [datasource] = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus" and datasource["isDefault"]
    assert datasource["url"] == "http://prometheus:9090"
    assert "9090:9090" in services["prometheus"]["ports"]
    [provider] = yaml.safe_load((provisioning / "dashboards" / "mowdeck.yaml").read_text())[
        "providers"
    ]
    folder = mounts[provider["options"]["path"]]
    assert (COMPOSE.parent / folder).resolve() == (
        Path(mowdeck.__file__).parents[1] / "deploy" / "grafana" / "dashboards"
    )
    assert sorted(p.name for p in (COMPOSE.parent / folder).glob("*.json")) == [
        "fleet.json",
        "gateway.json",
        "notifications.json",
        "overview.json",
        "realtime.json",
        "telemetry.json",
    ]


def test_the_docs_say_where_compose_keeps_the_vapid_key(
    services: dict[str, dict[str, Any]],
) -> None:
    env = services["notifications"]["environment"]
    key_file = Path(env["MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE"])
    [volume] = [
        v.split(":")[0]
        for v in services["notifications"]["volumes"]
        if v.split(":")[1] == str(key_file.parent)
    ]
    assert volume in (yaml.safe_load(COMPOSE.read_text())["volumes"] or {})
    docs = COMPOSE.parent / "docs"
    # Whitespace as one space: the pages wrap their lines anywhere.
    operations = " ".join((docs / "operations.md").read_text().split())
    channels = " ".join((docs / "notifications-channels.md").read_text().split())
    assert f"MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE={key_file}" in operations
    assert f"`{volume}` volume" in operations
    assert f"`{volume}` volume (`{key_file}`" in channels
    assert env["MOWDECK_NOTIFICATIONS_VAPID_SUBJECT"].startswith("mailto:")
