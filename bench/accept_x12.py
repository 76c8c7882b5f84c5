"""The front door taking one large X12 file (docs/api.md#edi-intake): a file
of 210s from the synthetic generator (default 100,000 invoices, about 60 MB)
POSTed to a real ``settleq api`` process over a socket, on real PostgreSQL and
RabbitMQ. Prints:

- POST→202: wall seconds from the first byte sent to the 202 (target ≤ 3 s);
- the reader: MB/s of CPU of ``read_file`` on the same bytes, in this process
  (target ≥ 40 MB/s), and of ``read_file`` + the mapping as the front door
  runs it (``map_stream``'s entries: a 210 of the fast path as its JSON bytes);
- the API's peak RSS against the file's size (target ≤ 3×), and what the file
  added to the idle process's.

Each run sends the file under its own interchange control numbers (ISA13 and
IEA02 rewritten, nothing else), so that each one is a new job, not a repeat.

    python -m bench.accept --x12 [--invoices 100000] [--runs 1]
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.run import process_stats
from services.tuning.gcpause import collector_paused
from shared.domain.signing import sign_request
from shared.domain.x12.mapping.files import map_stream
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file
from tests.support.infra import PRODUCER_ID, PRODUCER_SECRET, isolated_env
from tests.support.stack import Stack

PART = 65536  # what uvicorn reads from the socket at a time
TARGET_ACCEPT_S, TARGET_READER_MBS, TARGET_RSS_RATIO = 3.0, 40.0, 3.0
PATH = "/v1/batches?contract_version=1"


def renumbered(body: bytes, run: int) -> bytes:
    """The file with each interchange's ISA13 and IEA02 made this run's own
    (the n-th interchange's ``start + n``: one file names each once).

    ISA13 is the 13th element of the ISA (``*``-separated, as the generator
    writes it), IEA02 the last element of each IEA."""
    start = (time.time_ns() // 1000 + run * 1000) % 900_000_000
    isa13 = re.compile(rb"(ISA(?:\*[^*]*){12}\*)[0-9]{9}")
    iea02 = re.compile(rb"(IEA\*[0-9]+\*)[0-9]{9}")
    for pattern in (isa13, iea02):
        numbers = itertools.count(start + 1)
        body = pattern.sub(lambda m, n=numbers: m.group(1) + b"%09d" % next(n), body)
    return body


def parts(body: bytes) -> Iterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(body), PART):
        yield bytes(view[start : start + PART])


def reader_figures(body: bytes) -> tuple[float, float, int]:
    """(read_file CPU s, mapping CPU s, documents) on ``body``, in this process:
    the mapping as ``EdiIngest._take`` consumes it, each entry dropped once made,
    with the collector paused as the front door pauses it."""
    with collector_paused():
        cpu = time.process_time()
        interchanges = read_file(body)
        read = time.process_time() - cpu
        cpu = time.process_time()
        stream = map_stream(interchanges, contract_version=1, partition_key=None, period=None)
        documents = sum(1 for _ in stream.entries)
        return read, time.process_time() - cpu, documents


def post(client: httpx.Client, body: bytes) -> tuple[float, httpx.Response]:
    headers = {
        "X-Key-Id": PRODUCER_ID,
        "X-Signature": sign_request(PRODUCER_SECRET, int(time.time()), "POST", PATH, body),
        "Content-Type": "application/edi-x12",
    }
    wall = time.perf_counter()
    response = client.post(PATH, content=parts(body), headers=headers)
    return time.perf_counter() - wall, response


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(invoices: int, runs: int, map_processes: int | None = None) -> None:
    body = freight_210_file(invoices, seed=7, carriers=5)
    size_mb = len(body) / 1e6
    print(f"{invoices:,} invoices (210s), {size_mb:.1f} MB of X12", flush=True)
    read, mapped, documents = reader_figures(body)
    reader_mbs = size_mb / read
    print(
        f"reader: read_file {read:.2f} s CPU = {reader_mbs:.1f} MB/s"
        f" (target >= {TARGET_READER_MBS:g} MB/s: {verdict(reader_mbs >= TARGET_READER_MBS)})",
        flush=True,
    )
    # The 210 mapping after it, one core's worth (the API may map on two).
    print(
        f"  + mapping {mapped:.2f} s CPU ({mapped / documents * 1e6:.1f} µs a set, {documents:,}"
        f" documents): read and mapped at {size_mb / (read + mapped):.1f} MB/s of CPU",
        flush=True,
    )
    logs = Path("bench/logs")
    logs.mkdir(parents=True, exist_ok=True)
    with isolated_env("acceptx12") as env:
        tuning = {} if map_processes is None else {"x12_map_processes": map_processes}
        stack = Stack(env, logs, **tuning)
        try:
            stack.start_api()
            pid = stack.processes["api"].pid
            idle_rss = process_stats(pid)[0]
            with httpx.Client(base_url=stack.url, timeout=600) as client:
                for run in range(1, runs + 1):
                    this = renumbered(body, run)
                    cpu = process_stats(pid)[1]
                    wall, response = post(client, this)
                    cpu = process_stats(pid)[1] - cpu
                    assert response.status_code == 202, response.text[:2000]
                    assert response.json()["documents"] == documents
                    print(
                        f"run {run}: POST->202 {wall:.2f} s (target <= {TARGET_ACCEPT_S:g} s:"
                        f" {verdict(wall <= TARGET_ACCEPT_S)}), api CPU {cpu:.2f} s",
                        flush=True,
                    )
            peak = process_stats(pid)[0]
        finally:
            stack.stop()
    file_mib = len(body) / 2**20
    ratio = peak / file_mib
    met = verdict(ratio <= TARGET_RSS_RATIO)
    print(
        f"api peak RSS {peak:.0f} MiB = {ratio:.2f}x the file's {file_mib:.1f} MiB"
        f" (target <= {TARGET_RSS_RATIO:g}x: {met}); the file added {peak - idle_rss:.0f} MiB"
        f" = {(peak - idle_rss) / file_mib:.2f}x to the idle process's {idle_rss:.0f} MiB"
    )
