"""Does the web server stay quick while hostile uploads stream in, and how much memory does it take?

    python -m bench.upload_stress [--mb 100] [--uploads 3] [--seconds 10]

One uvicorn process serves the app, as in production. A client asks for a page (the dataset upload form) every
50 ms: first for ``--seconds`` with nothing else going on ("idle"), then while ``--uploads`` large hostile files of
``--mb`` MB each stream in at once ("loaded"): values nested 100,000 deep at the end of the file (pyarrow's reader
crashes on them, in its child process), a 64 MiB prompt, a Latin-1 byte at the end. Each upload is refused with its
message; the web process's resident memory (not its parse children's) is sampled every 50 ms throughout.

It runs on a data folder of its own (SQLite, the embedded Redis), unless DATABASE_URL / REDIS_URL say otherwise.
The last line is ``upload_stress_p95_ms=<p95 page latency while loaded> web_peak_mb=<peak RSS of the web process>``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

from bench.registry import parse_args
from bench.webapp import django_on_a_data_folder, p95, signed_in, web_server

CSRF = "b" * 32
BOUNDARY = "bench-upload-boundary"


def hostile_files(folder: Path, mb: int) -> list[tuple[str, Path, str]]:
    """(upload name, path, the message it must be refused with)."""
    line = json.dumps({"prompt": "What is 12 + 30?", "answer": "42", "note": "x" * 60}) + "\n"
    rows = max(1, mb * 1024**2 // len(line))
    body = line * rows
    deep, latin, huge = folder / "deep.jsonl", folder / "latin.jsonl", folder / "huge.jsonl"
    deep.write_text(body + '{"prompt": "x", "v": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    latin.write_bytes(body.encode() + '{"prompt": "café"}\n'.encode("latin-1"))
    huge.write_text(line * (rows // 2) + json.dumps({"prompt": "y" * (64 * 1024**2)}) + "\n")
    return [
        ("deep.jsonl", deep, f"line {rows + 1}: values are nested more than 32 levels deep, the limit"),
        ("latin.jsonl", latin, f"line {rows + 1}, column 16: not UTF-8 text"),  # é: the 16th character
        ("huge.jsonl", huge, "holds a text of 67108864 bytes; the limit is 4194304"),
    ]


def upload(port: int, cookie: str, name: str, path: Path) -> tuple[int, str]:
    """POST the file as the browser's form does, streamed from disk; (status, page)."""
    fields = {
        "csrfmiddlewaretoken": CSRF,
        "source": "file",
        "name": name,
        "prompt_column": "prompt",
        "gsm8k_column": "",
    }
    head = "".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()
    )
    head += (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n"
    )
    tail = f"\r\n--{BOUNDARY}--\r\n"
    length = len(head.encode()) + path.stat().st_size + len(tail.encode())
    sock = socket.create_connection(("127.0.0.1", port), timeout=600)
    sock.sendall(
        (
            f"POST /datasets/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\n"
            f"Connection: close\r\n\r\n"
        ).encode()
        + head.encode()
    )
    with open(path, "rb") as fh:
        while chunk := fh.read(1024**2):
            sock.sendall(chunk)
    sock.sendall(tail.encode())
    response = b""
    while data := sock.recv(1 << 16):
        response += data
    sock.close()
    status = int(response.split(b" ", 2)[1]) if response else 0
    return status, response.decode("utf-8", "replace")


def page_latencies(port: int, cookie: str, until: float) -> list[float]:
    out = []
    while time.time() < until:
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(
                f"GET /datasets/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
                f"Connection: close\r\n\r\n".encode()
            )
            while sock.recv(1 << 16):
                pass
        out.append((time.perf_counter() - started) * 1000)
        time.sleep(0.05)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of each hostile upload")
    parser.add_argument("--uploads", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the idle phase")
    args = parse_args(parser, argv, mb=2, seconds=1.0)

    with django_on_a_data_folder("bench-upload-") as env:
        import psutil

        _, cookie = signed_in(f"bench-upload-{os.getpid()}", csrf=CSRF)
        files = hostile_files(Path(env["GRPO_DATA_DIR"]), args.mb)[: args.uploads]
        with web_server(env) as (server, port):
            peak, sampling = [0], [True]

            def sample():
                web = psutil.Process(server.pid)
                while sampling[0]:
                    try:
                        peak[0] = max(peak[0], web.memory_info().rss)
                    except psutil.Error:
                        return
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                idle = page_latencies(port, cookie, time.time() + args.seconds)
                results: dict[str, tuple[int, str]] = {}
                uploads = [
                    threading.Thread(target=lambda n=name, p=path: results.__setitem__(n, upload(port, cookie, n, p)))
                    for name, path, _ in files
                ]
                started = time.time()
                for thread in uploads:
                    thread.start()
                loaded: list[float] = []
                while any(t.is_alive() for t in uploads):
                    loaded += page_latencies(port, cookie, time.time() + 1.0)
                took = time.time() - started
            finally:
                sampling[0] = False
        for name, _, message in files:
            status, page = results[name]
            if status != 400 or message not in page:
                shown = [line.strip() for line in page.splitlines() if "<li>" in line][:3]
                print(f"{name}: expected a 400 naming {message!r}, got {status}: {shown}", file=sys.stderr)
                return 1

    print(
        f"page GET every 50 ms: idle p50 {statistics.median(idle):.0f} ms, p95 {p95(idle):.0f} ms "
        f"({len(idle)} requests); while {len(files)} hostile uploads of {args.mb} MB streamed and were refused "
        f"({took:.0f} s): p50 {statistics.median(loaded):.0f} ms, p95 {p95(loaded):.0f} ms ({len(loaded)} requests); "
        f"web process peak RSS {peak[0] / 1e6:.0f} MB; on {os.cpu_count()} CPUs"
    )
    print(f"upload_stress_p95_ms={p95(loaded):.0f} web_peak_mb={peak[0] / 1e6:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
