"""Metrics exposed a second time under the names they had before a rename, for one release.

Dashboards and alert rules outside the project keep working while they move to the new
names: a rule on a name that no longer exists matches nothing, never fires, and nothing
says so. The values are the renamed metrics' own, read at each scrape; nothing is
counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["FormerNames"]


class FormerNames(Collector):
    """``metrics`` again, with the name prefix ``new`` replaced by ``old``."""

    def __init__(
        self, metrics: Iterable[Collector], *, new: str, old: str, registry: CollectorRegistry
    ) -> None:
        """Register the former names in ``registry``; ``ValueError`` for a metric whose name
        does not start with ``new``."""
        self._metrics = tuple(metrics)
        self._new = new
        self._old = old
        for metric in self._metrics:
            for family in metric.collect():
                self._name(family.name)
        registry.register(self)

    def _name(self, name: str) -> str:
        if not name.startswith(self._new):
            raise ValueError(f"metric {name!r} does not start with {self._new!r}")
        return self._old + name[len(self._new) :]

    def collect(self) -> Iterator[Metric]:
        """The renamed metrics' families under their former names."""
        for metric in self._metrics:
            for family in metric.collect():
                former = Metric(
                    self._name(family.name),
                    f"{family.documentation} (former name of {family.name}, removed in the "
                    "next release)",
                    family.type,
                    family.unit,
                )
                former.samples = [s._replace(name=self._name(s.name)) for s in family.samples]
                yield former
