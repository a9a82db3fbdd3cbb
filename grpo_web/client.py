"""`grpo-web`: the command-line client of the JSON API (installed with the project; needs only the standard library).

    export GRPO_WEB_URL=http://127.0.0.1:8000 GRPO_WEB_TOKEN=gwp_...   # a token from the Tokens page
    grpo-web submit config.yaml [--watch]      start a run from a run YAML (the import page's format)
    grpo-web watch RUN                         follow a run until it ends; exit 0 when it completed
    grpo-web export RUN [--filter k=v ...] [--format jsonl|parquet] [-o FILE]
                                               its rollouts, with the rollout browser's filters
    grpo-web runs [--status S] [--q TEXT]      list runs (id, status, progress, reward, name)
    grpo-web import PATH [--source trl|verl|trackio] [--validation DIR] [--upload] [--watch-folder] [--follow]
                                               a run trained elsewhere, from the files TRL or verl wrote: PATH on
                                               the server (under GRPO_IMPORT_ROOTS), or here with --upload; verl's
                                               validation dumps (DIR) become its evaluations

Exit codes: 0 done, 1 the run failed or was cancelled (or, submitted, was still being checked after 300 s), 2 the
request was refused (the errors are printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

FINISHED = ("completed", "failed", "cancelled")
# What a terminal acts on rather than shows: C0 and C1 controls (escape sequences retitle, clear or move the
# terminal), DEL, and the bidirectional overrides that reorder what follows them. Names and errors come from other
# users and from model output, so they are printed with these escaped.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text, *, lines: bool = False) -> str:
    """``text`` fit for a terminal: each control or bidi character shown as its escape (``\\x1b``, ``\\u202e``);
    with ``lines``, newlines and tabs are kept."""

    def escape(match: re.Match) -> str:
        char = match.group()
        if lines and char in "\n\t":
            return char
        return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"

    return UNSAFE.sub(escape, str(text))


class ApiError(Exception):
    def __init__(self, status: int, errors: list[str], notes: list[str] | None = None):
        super().__init__("; ".join(errors))
        self.status, self.errors, self.notes = status, errors, notes or []


class Client:
    def __init__(self, url: str, token: str, timeout: float = 60):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def request(self, method: str, path: str, *, params: dict | list | None = None, body: dict | None = None):
        """The open response (for streaming); an ApiError with the server's own messages otherwise."""
        query = "?" + urllib.parse.urlencode(params, doseq=True) if params else ""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"{self.url}/api{path}{query}", data=data, method=method, headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            raise ApiError(exc.code, _messages(raw, exc.code), _notes(raw)) from None
        except urllib.error.URLError as exc:
            raise ApiError(0, [f"cannot reach {self.url}: {exc.reason}"]) from None

    def json(self, method: str, path: str, **kwargs):
        with self.request(method, path, **kwargs) as response:
            return json.loads(response.read() or b"null")

    def upload(self, path: str, *, fields: dict, files: list[str]):
        """POST ``files`` (local paths, as the form field ``files``) and ``fields`` as multipart/form-data."""
        boundary = f"grpo-web-{time.time_ns()}"
        parts = []
        for name, value in fields.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
        for file in files:
            with open(file, "rb") as fh:
                content = fh.read()
            filename = os.path.basename(file).replace('"', "")
            head = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            )
            parts.append(head.encode() + content + b"\r\n")
        data = b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        }
        req = urllib.request.Request(f"{self.url}/api{path}", data=data, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _messages(exc.read(), exc.code)) from None
        except urllib.error.URLError as exc:
            raise ApiError(0, [f"cannot reach {self.url}: {exc.reason}"]) from None


def _messages(raw: bytes, status: int) -> list[str]:
    try:
        data = json.loads(raw)
    except ValueError:
        return [f"HTTP {status}"]
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        return [str(e) for e in data["errors"]]
    if isinstance(data, dict) and "detail" in data:
        detail = data["detail"]
        if isinstance(detail, list):  # a request the schema refused: each item names its field
            return [f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" for d in detail]
        return [f"HTTP {status}: {detail}"]
    return [f"HTTP {status}"]


def _notes(raw: bytes) -> list[str]:
    """A refused run's import notes (what the import changed), said beside its errors."""
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    notes = data.get("import_notes") if isinstance(data, dict) else None
    return [str(n) for n in notes] if isinstance(notes, list) else []


def submit(client: Client, path: str, *, queue_anyway: bool = False) -> dict:
    # the file as it is (newline="": its size is the file's), whole: the server refuses one over its limit
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    return client.json("POST", "/runs", body={"yaml": text, "queue_anyway": queue_anyway})


CHECK_WAIT_SECONDS = 300  # the longest `submit` waits for the server's check of a run's rewards


def checked(client: Client, run: dict, *, interval: float = 0.5, limit: float = CHECK_WAIT_SECONDS) -> dict:
    """The run once the server has checked its rewards (status no longer "checking"): queued, or failed with its
    refusal; still "checking" after ``limit`` seconds (no worker serves the checks queue)."""
    deadline = time.monotonic() + limit
    while run["status"] == "checking" and time.monotonic() < deadline:
        time.sleep(interval)
        run = client.json("GET", f"/runs/{run['id']}")
    return run


def watch(client: Client, run_id: int, *, interval: float = 2.0, out=sys.stdout) -> dict:
    """Print a line per new step (and status change) until the run ends; the run as it ended."""
    seen = None
    while True:
        run = client.json("GET", f"/runs/{run_id}")
        state = (run["status"], run["step"])
        if state != seen:
            reward = ""
            if run["step"] and (seen is None or run["step"] != seen[1]):
                series = client.json("GET", f"/runs/{run_id}/metrics").get("series", {}).get("reward") or []
                if series and series[-1] is not None:
                    reward = f"  reward {series[-1]:.4f}"
            print(
                f"run {run_id} {safe(run['status']):<9} step {run['step']}/{run['total_steps']}{reward}",
                file=out,
                flush=True,
            )
            seen = state
        if run["status"] in FINISHED:
            if run.get("error"):
                print(safe(run["error"], lines=True), file=out)
            return run
        time.sleep(interval)


def export(client: Client, run_id: int, *, filters: list[str], fmt: str, out) -> int:
    params = [("format", fmt)]
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep:
            raise ApiError(2, [f"--filter {item!r}: write key=value (e.g. reward_min=1)"])
        params.append((key, value))
    with client.request("GET", f"/runs/{run_id}/rollouts/export", params=params) as response:
        before = out.tell() if out.seekable() else 0
        shutil.copyfileobj(response, out)
        return (out.tell() if out.seekable() else 0) - before


def export_file(client: Client, run_id: int, *, filters: list[str], fmt: str, path: str) -> int:
    """``export`` into the file ``path``, whole or not at all: the rows go to a file beside it, renamed onto it once
    the last byte came, so a refusal or a cut stream leaves no empty or half file (and a file already there as it
    was)."""
    fd, partial = tempfile.mkstemp(prefix=".grpo-web-export-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as fh:
            size = export(client, run_id, filters=filters, fmt=fmt, out=fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    return size


def local_files(path: str) -> list[str]:
    """The files to upload for a local TRL output_dir, completions folder or verl dump folder (or one file)."""
    if os.path.isfile(path):
        return [path]
    for folder in (os.path.join(path, "completions"), path):
        if os.path.isdir(folder):
            names = sorted(
                n for n in os.listdir(folder) if n.endswith(".parquet") or (n.endswith(".jsonl") and n[:-6].isdigit())
            )
            if names:
                return [os.path.join(folder, n) for n in names]
    raise ApiError(2, [f"{path}: no .parquet tables (TRL) or {{step}}.jsonl dumps (verl) to upload"])


def import_run(client: Client, args) -> dict:
    """Import a run trained elsewhere: a server path, or local files uploaded."""
    options: dict = {}
    if args.num_generations:
        options["num_generations"] = args.num_generations
    if args.reward_weights:
        try:
            options["reward_weights"] = [float(w) for w in args.reward_weights.split(",")]
        except ValueError:
            raise ApiError(2, [f"--reward-weights {args.reward_weights!r}: numbers separated by commas"]) from None
    if args.reward_names:
        options["reward_names"] = [n.strip() for n in args.reward_names.split(",") if n.strip()]
    if args.no_std:
        options["norm_adv_by_std_in_grpo"] = False
    if args.trackio_run:
        options["run"] = args.trackio_run
    if args.upload:
        if args.watch_folder:
            raise ApiError(2, ["--watch-folder: only a folder on the server can be watched, not an upload"])
        if args.validation:
            raise ApiError(
                2,
                [
                    "--validation: a server path; uploaded, verl's validation dumps import alone (upload the "
                    "validation_data_dir without the rollout dumps: the run is its evaluations)"
                ],
            )
        fields = {"source": args.source, "name": args.name, "model": args.model}
        if args.num_generations:
            fields["num_generations"] = str(args.num_generations)
        if args.trackio_run:
            fields["run"] = args.trackio_run
        return client.upload("/runs/import/upload", fields=fields, files=local_files(args.path))
    body = {"path": args.path, "source": args.source, "name": args.name, "model": args.model}
    if args.validation:
        body["validation_path"] = args.validation
    return client.json("POST", "/runs/import", body={**body, "options": options, "watch": args.watch_folder})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-web", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("GRPO_WEB_URL", "http://127.0.0.1:8000"),
        help="the app's address (GRPO_WEB_URL)",
    )
    parser.add_argument(
        "--token", default=os.environ.get("GRPO_WEB_TOKEN", ""), help="a personal access token (GRPO_WEB_TOKEN)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("submit", help="start a run from a run YAML")
    p.add_argument("config")
    p.add_argument("--queue-anyway", action="store_true", help="queue even while no worker has the GPUs asked for")
    p.add_argument("--watch", action="store_true", help="then follow it until it ends")
    p = commands.add_parser("watch", help="follow a run until it ends")
    p.add_argument("run", type=int)
    p.add_argument("--interval", type=float, default=2.0)
    p = commands.add_parser("export", help="a run's rollouts, filtered as in the rollout browser")
    p.add_argument("run", type=int)
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a rollout browser filter, e.g. reward_min=1 step_min=10 phrase=Wait; repeat for more",
    )
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("-o", "--output", help="a file (default: standard output)")
    p = commands.add_parser("runs", help="list runs")
    p.add_argument("--status", default="")
    p.add_argument("--q", default="")
    p = commands.add_parser("import", help="a run trained elsewhere, from the files TRL, verl or Trackio wrote")
    p.add_argument(
        "path",
        help="a TRL output_dir (or its completions folder, or one table), a verl dump folder (rollout_data_dir, "
        "validation_data_dir, or a folder holding both), or a Trackio project's .db",
    )
    p.add_argument("--source", choices=("auto", "trl", "verl", "trackio"), default="auto")
    p.add_argument(
        "--validation",
        default="",
        metavar="DIR",
        help="verl's validation_data_dir on the server, when PATH is not a folder holding it: its dumps become the "
        "run's evaluations",
    )
    p.add_argument("--upload", action="store_true", help="PATH is here: upload its files (else a server path)")
    p.add_argument("--name", default="")
    p.add_argument("--model", default="", help="the model it trained (the files do not say)")
    p.add_argument("--num-generations", type=int, default=0, help="TRL's completions per prompt (else inferred)")
    p.add_argument("--reward-weights", default="", help="TRL's reward_weights, e.g. 1,0.5")
    p.add_argument("--reward-names", default="", help="the columns or keys that are reward functions, e.g. acc,fmt")
    p.add_argument("--no-std", action="store_true", help="verl ran with norm_adv_by_std_in_grpo=false")
    p.add_argument("--trackio-run", default="", help="the run of a Trackio project that holds several")
    p.add_argument("--watch-folder", action="store_true", help="follow the folder while the run writes it")
    p.add_argument("--follow", action="store_true", help="then print its progress until it ends")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("give a token: --token or GRPO_WEB_TOKEN (make one on the app's Tokens page)")
    client = Client(args.url, args.token)
    try:
        if args.command == "submit":
            run = submit(client, args.config, queue_anyway=args.queue_anyway)
            for note in run.get("import_notes") or []:
                print(f"note: {safe(note, lines=True)}")
            run = checked(client, run)
            if run.get("refusal"):
                print(f"refused run {run['id']}: {client.url}{run['url']}", file=sys.stderr)
                raise ApiError(400, run["refusal"])
            if run["status"] == "checking":
                print(
                    f"run {run['id']} is still checking its rewards after {CHECK_WAIT_SECONDS} s: is a worker serving "
                    f"the 'checks' queue running? {client.url}{run['url']}",
                    file=sys.stderr,
                )
                return 1
            print(f"queued run {run['id']}: {client.url}{run['url']}", flush=True)
            if args.watch:
                return 0 if watch(client, run["id"]).get("status") == "completed" else 1
        elif args.command == "watch":
            return 0 if watch(client, args.run, interval=args.interval)["status"] == "completed" else 1
        elif args.command == "export":
            if args.output:
                size = export_file(client, args.run, filters=args.filter, fmt=args.format, path=args.output)
                print(f"wrote {size} bytes to {args.output}", file=sys.stderr)
            else:
                export(client, args.run, filters=args.filter, fmt=args.format, out=sys.stdout.buffer)
        elif args.command == "import":
            run = import_run(client, args)
            print(f"imported run {run['id']}: {safe(run['completeness'])}")
            for note in run.get("notes") or []:
                print(f"note: {safe(note, lines=True)}")
            print(f"{client.url}{run['url']}", flush=True)
            if args.follow:
                return 0 if watch(client, run["id"]).get("status") == "completed" else 1
        elif args.command == "runs":
            for run in client.json("GET", "/runs", params={"status": args.status, "q": args.q}):
                reward = "" if run["latest_reward"] is None else f"{run['latest_reward']:.4f}"
                print(
                    f"{run['id']:>6}  {safe(run['status']):<9} {run['step']:>5}/{run['total_steps'] or '?':<5} "
                    f"{reward:>8}  "
                    f"{safe(run['name'])}"
                )
    except ApiError as exc:
        for note in exc.notes:
            print(f"note: {safe(note, lines=True)}", file=sys.stderr)
        for error in exc.errors:
            print(f"grpo-web: {safe(error, lines=True)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"grpo-web: {safe(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
