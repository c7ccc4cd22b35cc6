"""``mowdeck contracts``: export and check the schemas; an unusable folder is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from mowdeck.cli import main


def test_export_then_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "new" / "schemas"
    assert main(["contracts", "export", "--dir", str(target)]) == 0
    assert any(target.glob("*.json"))
    assert main(["contracts", "check", "--dir", str(target)]) == 0
    assert "stale" not in capsys.readouterr().out


def test_export_into_a_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["contracts", "export", "--dir", str(blocker / "schemas")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mowdeck contracts: {blocker / 'schemas'}: ")
    assert "Not a directory" in err
    assert "Traceback" not in err
