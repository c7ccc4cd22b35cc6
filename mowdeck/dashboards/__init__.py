"""Grafana dashboards as code: an overview and one per service, exported under deploy/grafana/.

Built with ``grafana-foundation-sdk`` (a development dependency: ``pip install -e
'.[dev]'``); ``mowdeck dashboards export`` writes the JSON and ``mowdeck dashboards check``
(and a unit test) fails when the committed files are not what the code makes.
"""

from mowdeck.dashboards.export import (
    DASHBOARD_DIR,
    dashboards,
    render,
    stale_dashboards,
    write_dashboards,
)

__all__ = ["DASHBOARD_DIR", "dashboards", "render", "stale_dashboards", "write_dashboards"]
