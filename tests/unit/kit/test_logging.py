import logging

import pytest
import structlog

from mowdeck.kit.logging import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_console_logs_into_a_file_carry_no_colour_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", "console")
    structlog.get_logger("t").warning("something happened", mower_id="m1")
    err = capsys.readouterr().err
    assert "something happened" in err
    assert "mower_id=m1" in err
    assert "\x1b[" not in err
