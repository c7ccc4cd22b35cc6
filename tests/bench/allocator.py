"""A gateway shard's CPU and page faults under each allocator setting.

One gateway shard in front of ``mowdeck sim`` with 1,000 mowers (``tests.capacity``'s
``gateway_load``): an idle window (heartbeats only), then 300 commands a second until
every command has its result. The shard runs under one setting at a time, in the order
given (alternate them: this machine's speed drifts during a run):

- ``off``: glibc's defaults (``MOWDECK_MALLOC_TUNING=false``);
- ``tuned``: what a service does at start (``mowdeck/kit/allocator.py``): the thresholds
  fixed at 128/256 KiB and two arenas, so asyncio's 256 KiB socket reads are mappings;
- ``thresholds``: the same through glibc's own variables, as an operator would set them.

Per run: CPU seconds of each window, the cost per state and per command (as
``tests.capacity`` derives them) and the shard's minor page faults at the end.

Run: python -m tests.bench.allocator [--smoke] [off tuned thresholds ...] (by default
``off`` and ``tuned`` twice each, alternating; ``--smoke``: ``tuned`` once, short windows)
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import tests.capacity.gateway_load as load

VARIANTS: dict[str, dict[str, str]] = {
    "off": {"MOWDECK_MALLOC_TUNING": "false"},
    "thresholds": {
        "MOWDECK_MALLOC_TUNING": "false",
        "MALLOC_MMAP_THRESHOLD_": "131072",
        "MALLOC_TRIM_THRESHOLD_": "262144",
        "MALLOC_ARENA_MAX": "2",
    },
    "tuned": {"MOWDECK_MALLOC_TUNING": "true"},
}
_ALL = sorted({name for variant in VARIANTS.values() for name in variant})


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (``/proc/<pid>/stat``, field 10)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[7])


async def run(name: str, *, seconds: float, idle_s: float) -> dict[str, Any]:
    """One gateway load under the setting ``name``."""
    faults: list[int] = []
    cpu_seconds = load.cpu_seconds

    def sampled(pid: int, **kwargs: Any) -> float:
        faults.append(minor_faults(pid))
        return cpu_seconds(pid, **kwargs)

    saved = {k: os.environ.get(k) for k in _ALL}
    for k in _ALL:
        os.environ.pop(k, None)
    os.environ.update(VARIANTS[name])
    load.cpu_seconds = sampled  # the load samples the shard's CPU at each window's edge
    try:
        r = await load.gateway_load(1, 1000, 300.0, seconds, idle_s=idle_s)
    finally:
        load.cpu_seconds = cpu_seconds
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    idle, loaded = sum(r["idle_cpu_s"]), sum(r["loaded_cpu_s"])
    per_state = idle / r["idle_states"]
    return {
        "variant": name,
        "idle_cpu_s": round(idle, 2),
        "loaded_cpu_s": round(loaded, 2),
        "us_per_state": round(per_state * 1e6),
        "us_per_command": round((loaded - r["loaded_states"] * per_state) / r["commands"] * 1e6),
        "minor_faults": faults[-1] if faults else None,
    }


async def main(names: list[str], *, smoke: bool) -> None:
    """Run each setting in turn and print a line each."""
    seconds, idle_s = (3.0, 3.0) if smoke else (15.0, 10.0)
    for name in names:
        out = await run(name, seconds=seconds, idle_s=idle_s)
        print(" ".join(f"{k}={v}" for k, v in out.items()), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.bench.allocator")
    parser.add_argument("variants", nargs="*", help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    every = ["off", "tuned", "tuned", "off"]
    names = args.variants or (["tuned"] if args.smoke else every)
    if unknown := sorted(set(names) - set(VARIANTS)):
        parser.error(f"unknown variant {', '.join(unknown)}: choose of {', '.join(VARIANTS)}")
    asyncio.run(main(names, smoke=args.smoke))
