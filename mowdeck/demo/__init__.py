"""``mowdeck demo``: every service and simulated mowers in one process.

``running_demo(args)`` starts everything (``running.py``) and yields a ``Demo``;
``banner(demo)`` is what a person reads; ``configure`` and ``run`` are the command
(``cli.py``). ``bus.py`` is the demo's NATS, ``scenario.py`` what its mowers do,
``auth.py`` who it signs in as and ``addresses.py`` where it listens.
"""

from mowdeck.demo.auth import DEMO_ACCOUNT, DEMO_USER
from mowdeck.demo.banner import banner
from mowdeck.demo.cli import configure, run
from mowdeck.demo.running import Demo, DemoError, running_demo

__all__ = [
    "DEMO_ACCOUNT",
    "DEMO_USER",
    "Demo",
    "DemoError",
    "banner",
    "configure",
    "run",
    "running_demo",
]
