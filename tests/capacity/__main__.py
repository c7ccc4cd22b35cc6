"""``python -m tests.capacity [--mowers N]``, ``... measure [--quick]``, ``... check``."""

from __future__ import annotations

import argparse
import sys

from tests.capacity import check, measure, report
from tests.capacity.model import Workload


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.capacity", description=__doc__)
    p.add_argument("action", nargs="?", choices=["plan", "measure", "check"], default="plan")
    p.add_argument("--mowers", type=int, action="append", help="fleet size (repeatable)")
    p.add_argument("--quick", action="store_true", help="measure: small samples")
    p.add_argument(
        "--services", action="store_true", help="measure: Realtime's and Fleet's costs alone"
    )
    p.add_argument("--mowing-share", type=float, default=Workload.mowing_share)
    p.add_argument("--commands-per-day", type=float, default=Workload.commands_per_mower_day)
    p.add_argument(
        "--notifications-per-day", type=float, default=Workload.notifications_per_mower_day
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Plan, measure or check."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.action == "measure":
        return measure.main(args.quick, only_services=args.services)
    if args.action == "check":
        return check.main()
    workload = Workload(
        mowing_share=args.mowing_share,
        commands_per_mower_day=args.commands_per_day,
        notifications_per_mower_day=args.notifications_per_day,
    )
    return report.main(args.mowers or [10_000, 100_000, 1_000_000], workload)


if __name__ == "__main__":
    sys.exit(main())
