"""What a process uses, read from /proc: resident memory, open files, threads, CPU time."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcSample", "cpu_seconds", "descendants", "sample"]

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcSample:
    """One process (or a tree summed) at one moment."""

    rss_mb: float
    open_files: int
    threads: int
    cpu_s: float
    processes: int = 1

    def __add__(self, other: ProcSample) -> ProcSample:
        return ProcSample(
            rss_mb=self.rss_mb + other.rss_mb,
            open_files=self.open_files + other.open_files,
            threads=self.threads + other.threads,
            cpu_s=self.cpu_s + other.cpu_s,
            processes=self.processes + other.processes,
        )


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name is in parentheses and may hold spaces: split after its last one.
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User and system CPU time of ``pid`` (with its reaped children's when asked)."""
    f = _stat_fields(pid)
    ticks = int(f[11]) + int(f[12])  # utime, stime (fields 14, 15 of proc(5))
    if children:
        ticks += int(f[13]) + int(f[14])  # cutime, cstime
    return ticks / _TICKS


def sample(pid: int) -> ProcSample:
    """The process's RSS, open descriptors, threads and CPU time now."""
    f = _stat_fields(pid)
    return ProcSample(
        rss_mb=int(f[21]) * _PAGE / 1e6,  # rss in pages (field 24)
        open_files=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(f[17]),  # num_threads (field 20)
        cpu_s=(int(f[11]) + int(f[12])) / _TICKS,
    )


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of ``pid`` with its command name."""
    parents: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        child = int(entry)
        names[child] = text[text.index("(") + 1 : text.rindex(")")]
        parents.setdefault(int(text[text.rindex(")") + 2 :].split()[1]), []).append(child)
    found: dict[int, str] = {}
    todo = list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        found[child] = names.get(child, "?")
        todo.extend(parents.get(child, []))
    return found
