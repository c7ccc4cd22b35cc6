"""The few panel shapes every Mowdeck dashboard uses, on ``grafana-foundation-sdk`` builders.

Every panel reads the data source of the ``datasource`` variable, numbers itself and its
queries (``id``, ``refId`` A, B...) and keeps its PromQL in ``targets[].expr``, where tools
that evaluate dashboards look. Ranges are written out (``[5m]``), not Grafana's
``$__rate_interval``, so each expression runs unchanged against Prometheus's API.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import TypeVar

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog import variants
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DataSourceRef

__all__ = ["WINDOW", "Board", "Query", "quantile", "rate"]

# The range of every rate and quantile: 5 m holds at least a few scrapes at any usual interval.
WINDOW = "5m"
# The panel builders of the board, each sharing what ``Board._common`` sets.
P = TypeVar("P", timeseries.Panel, stat.Panel)
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


@dataclass(frozen=True)
class Query:
    """One PromQL expression of a panel and the legend of its series."""

    expr: str
    legend: str = ""


@dataclass
class Board:
    """A dashboard being built: its rows and panels, numbered as they are added."""

    uid: str
    title: str
    description: str
    _builder: dashboard.Dashboard = field(init=False)
    _next_id: int = field(init=False, default=1)

    def __post_init__(self) -> None:
        self._builder = (
            dashboard.Dashboard(self.title)
            .uid(self.uid)
            .description(self.description)
            .tags(["mowdeck"])
            .editable()
            .time("now-1h", "now")
            .refresh("30s")
            .timezone("browser")
            .with_variable(
                dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
            )
        )

    def _take_id(self) -> int:
        taken, self._next_id = self._next_id, self._next_id + 1
        return taken

    def row(self, title: str) -> Board:
        """Start a row: the panels added next go under it."""
        self._builder.with_row(dashboard.Row(title).id(self._take_id()))
        return self

    @staticmethod
    def _targets(queries: list[Query]) -> list[Builder[variants.Dataquery]]:
        if not 0 < len(queries) <= len(string.ascii_uppercase):
            raise ValueError(f"a panel takes 1 to 26 queries, not {len(queries)}")
        targets: list[Builder[variants.Dataquery]] = [
            prometheus.Dataquery()
            .expr(q.expr)
            .legend_format(q.legend or "__auto")
            .ref_id(letter)
            .range()
            for q, letter in zip(queries, string.ascii_uppercase, strict=False)
        ]
        return targets

    def _common(
        self, panel: P, title: str, description: str, queries: list[Query], *, unit: str, width: int
    ) -> P:
        """What every panel of the board sets: its id, texts, data source, queries, unit and
        width."""
        return (
            panel.id(self._take_id())
            .title(title)
            .description(description)
            .datasource(DATASOURCE)
            .targets(self._targets(queries))
            .unit(unit)
            .span(width)
        )

    def timeseries(
        self,
        title: str,
        description: str,
        queries: list[Query],
        *,
        unit: str = "short",
        width: int = 12,
    ) -> Board:
        """A time series panel of ``queries``."""
        panel = (
            self._common(timeseries.Panel(), title, description, queries, unit=unit, width=width)
            .height(8)
            .legend(
                common_builders.VizLegendOptions()
                .display_mode(common.LegendDisplayMode.LIST)
                .placement(common.LegendPlacement.BOTTOM)
                .show_legend(True)
            )
            .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
        )
        self._builder.with_panel(panel)
        return self

    def stat(
        self,
        title: str,
        description: str,
        queries: list[Query],
        *,
        unit: str = "short",
        width: int = 6,
    ) -> Board:
        """A single-value panel: the last value of each query."""
        panel = (
            self._common(stat.Panel(), title, description, queries, unit=unit, width=width)
            .height(4)
            .graph_mode(common.BigValueGraphMode.AREA)
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        )
        self._builder.with_panel(panel)
        return self

    def build(self) -> object:
        """The dashboard model (``grafana_foundation_sdk.models.dashboard.Dashboard``)."""
        return self._builder.build()


def rate(metric: str, by: str = "", selector: str = "") -> str:
    """``sum [by (labels)] (rate(metric{selector}[WINDOW]))``."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{selector}[{WINDOW}]))"


def quantile(q: float, histogram: str, by: str = "", selector: str = "") -> str:
    """The ``q`` quantile of a histogram over ``WINDOW``, grouped by ``by`` and ``le``."""
    labels = ", ".join(["le", *(b.strip() for b in by.split(",") if b.strip())])
    return (
        f"histogram_quantile({q}, sum by ({labels}) (rate({histogram}_bucket{selector}[{WINDOW}])))"
    )
