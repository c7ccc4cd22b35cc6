"""``mowdeck dashboards``: export and check; a stale file, a bad folder, no generator."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mowdeck.cli import main
from mowdeck.dashboards import DASHBOARD_DIR


def test_the_default_folder_is_the_committed_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboards", "check"]) == 0
    assert capsys.readouterr().out == ""
    assert DASHBOARD_DIR.is_dir()


def test_export_then_check_then_a_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new" / "dashboards"
    assert main(["dashboards", "export", "--dir", str(target)]) == 0
    assert (target / "overview.json").exists()
    assert main(["dashboards", "check", "--dir", str(target)]) == 0
    (target / "realtime.json").write_text("{}\n")
    capsys.readouterr()
    assert main(["dashboards", "check", "--dir", str(target)]) == 1
    assert capsys.readouterr().out == "stale: realtime.json\n"


def test_export_into_a_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["dashboards", "export", "--dir", str(blocker / "dashboards")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mowdeck dashboards: {blocker / 'dashboards'}: ")
    assert "Traceback" not in err


def test_without_the_generator_installed_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "grafana_foundation_sdk" else real(name, *a),
    )
    assert main(["dashboards", "check"]) == 2
    assert "pip install -e '.[dev]'" in capsys.readouterr().err
