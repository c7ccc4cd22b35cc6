"""Where the soaked process's memory goes: a ``tracemalloc`` diff from the warm-up to the end."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

__all__ = ["MemoryTrace"]


class MemoryTrace:
    """Starts tracing after ``after`` seconds; ``write`` puts the largest growths in a file."""

    def __init__(self, after: float) -> None:
        self.after = after
        self.first: tracemalloc.Snapshot | None = None

    async def run(self) -> None:
        """Wait for the warm-up, then start tracing and take the first snapshot."""
        await asyncio.sleep(self.after)
        tracemalloc.start(4)
        self.first = tracemalloc.take_snapshot()

    def write(self, path: Path, top: int = 25) -> None:
        """The ``top`` largest growths since the first snapshot, by traceback."""
        if self.first is None:
            return
        last = tracemalloc.take_snapshot()
        every = last.compare_to(self.first, "traceback")
        stats = every[:top]
        total = sum(stat.size_diff for stat in every)
        lines = [f"traced allocations grew {total / 1e6:+.2f} MB in all; the largest:"]
        for stat in stats:
            lines.append(f"{stat.size_diff / 1e6:+.2f} MB in {stat.count_diff:+d} blocks")
            lines.extend(f"    {line}" for line in stat.traceback.format())
        path.write_text("\n".join(lines) + "\n")
