"""Uploads: a 5 MiB upload through the studio (parse, hash, fsync, bind) against raw Python
writing and fsyncing the same bytes to the same disk, and the server's peak memory while
ten 10 MiB uploads arrive at once."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.setup import signed_in

MIB = 1024 * 1024


def pdf_bytes(size: int, seed: int) -> bytes:
    head = b"%PDF-1.4\n%" + str(seed).encode() + b"\n"
    return head + os.urandom(size - len(head))


BOUNDARY = "studio-bench-boundary"


def multipart(key: str, content: bytes) -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\n{key}"
            f"\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"receipt.pdf\"\r\nContent-Type: application/pdf\r\n\r\n").encode() \
        + content + f"\r\n--{BOUNDARY}--\r\n".encode()


def raw_write(folder: Path, content: bytes) -> float:
    """The floor: write the bytes to a new file on the same disk and fsync it."""
    started = time.perf_counter()
    path = folder / f"raw-{time.monotonic_ns()}"
    with path.open("wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def reset_peak(pid: int) -> float:
    """Start counting the peak afresh (Linux: 5 > clear_refs) and return the RSS now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_uploads(work: Path, server: Any, bare: Any, db_path: Path, rounds: int
                  ) -> dict[str, Any]:
    """`server` is a running `studio serve --demo` on `db_path`; `bare` the bare Starlette
    app, whose upload route only streams, hashes and fsyncs."""
    client = signed_in(server.url)
    invoice = next(i["id"] for i in client.get("/invoices").json() if i["status"] == "draft")
    url = f"/invoices/{invoice}/attachments"
    studio_s, raw_s, bare_s = [], [], []
    bare_client = httpx.Client(base_url=bare.url, timeout=120)
    raw_folder = Path(str(db_path) + ".files")
    raw_folder.mkdir(exist_ok=True)
    try:
        client.post(url, data={"client_key": "warm"}, files={"file": ("w.pdf", pdf_bytes(MIB, 0))})
        for n in range(rounds):
            content = pdf_bytes(5 * MIB, n + 1)
            body = multipart(f"bench-{n}", content)  # built before the clock starts
            started = time.perf_counter()
            reply = client.post(url, content=body, headers={
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
            studio_s.append(time.perf_counter() - started)
            assert reply.status_code == 201, reply.text
            raw_s.append(raw_write(raw_folder, content))
            started = time.perf_counter()
            bare_client.post("/bare-upload", content=body).raise_for_status()
            bare_s.append(time.perf_counter() - started)

        before = reset_peak(server.process.pid)
        cookie = client.cookies["studio_session"]

        async def ten() -> list[int]:
            async with httpx.AsyncClient(base_url=server.url, timeout=300, cookies={
                    "studio_session": cookie}, headers={"Accept": "application/json"}) as http:
                replies = await asyncio.gather(*(
                    http.post(url, data={"client_key": f"big-{n}"},
                              files={"file": (f"{n}.pdf", pdf_bytes(10 * MIB - 4096, 100 + n))})
                    for n in range(10)))
            return [reply.status_code for reply in replies]

        statuses = asyncio.run(ten())
        assert statuses == [201] * 10, statuses
        grew = peak_rss_mb(server.process.pid) - before
    finally:
        client.close()
        bare_client.close()
    studio, baseline = statistics.median(studio_s), statistics.median(raw_s)
    floor = statistics.median(bare_s)
    return {"upload_ratio": studio / baseline, "upload_5mib_ms": studio * 1000,
            "upload_5mib_raw_ms": baseline * 1000, "upload_5mib_bare_http_ms": floor * 1000,
            "upload_vs_bare_http_ratio": studio / floor, "upload_rss_mb_10x10mib": grew}
