"""``mowdeck sim`` arguments: numbers that would stall or break the simulator are refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from simulator.cli import configure
from simulator.fleet import FleetConfig


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mowdeck sim")
    configure(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--speed", "0"),
        ("--speed", "-2"),
        ("--speed", "nan"),
        ("--speed", "inf"),
        ("--speed", "fast"),
        ("--report-interval", "0"),
        ("--report-interval", "-1"),
        ("--report-interval", "nan"),
    ],
)
def test_speed_and_report_interval_must_be_positive_and_finite(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    with pytest.raises(SystemExit) as info:
        parse(flag, value)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert "number" in err
    assert "Traceback" not in err


def test_valid_numbers_are_taken() -> None:
    args = parse("--speed", "2.5", "--report-interval", "0.2")
    assert (args.speed, args.report_interval) == (2.5, 0.2)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("127.0.0.1:99999", "port must be 0 to 65535"),
        ("127.0.0.1", "expected HOST:PORT"),
        ("127.0.0.1:http", "expected HOST:PORT"),
    ],
)
def test_listen_needs_a_host_and_a_valid_port(
    capsys: pytest.CaptureFixture[str], value: str, says: str
) -> None:
    with pytest.raises(SystemExit) as info:
        parse("--listen", value)
    assert info.value.code == 2
    assert says in capsys.readouterr().err


def test_bootstrap_file_folder_must_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert parse("--bootstrap-file", str(tmp_path / "m.json")).bootstrap_file == tmp_path / "m.json"
    with pytest.raises(SystemExit) as info:
        parse("--bootstrap-file", str(tmp_path / "missing" / "m.json"))
    assert info.value.code == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "config",
    [{"speed": 0.0}, {"speed": float("nan")}, {"report_interval": 0.0}, {"report_interval": -1.0}],
)
def test_fleet_config_refuses_what_would_stall_the_ticker(config: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive finite"):
        FleetConfig(**config)  # type: ignore[arg-type]
