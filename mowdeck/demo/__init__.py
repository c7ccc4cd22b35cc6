"""``mowdeck demo``: every service and simulated mowers in one process."""
