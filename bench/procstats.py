"""CPU and memory of processes and of the machine, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def process_stats(pid: int) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of a process and its descendants."""
    peak = cpu = 0.0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) / 1024)
        cpu += (int(fields[11]) + int(fields[12])) / TICK
    return peak, cpu


def machine_cpu() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine so far."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / TICK, iowait / TICK


def service_cpu() -> dict[str, float]:
    """CPU seconds so far of the services settleq runs on (all their processes)."""
    names = {"postgres": "postgres", "redis-server": "redis", "beam.smp": "rabbitmq"}
    totals = dict.fromkeys(names.values(), 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm in names:
            fields = stat.rsplit(")", 1)[1].split()
            totals[names[comm]] += (int(fields[11]) + int(fields[12])) / TICK
    return totals
