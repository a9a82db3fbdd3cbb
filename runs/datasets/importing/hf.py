"""Hugging Face datasets: loaded from a saved folder, a data folder or the hub, and handed on as Arrow batches."""

from __future__ import annotations

import re
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pyarrow as pa

from grpo_web.env import hub_offline
from runs.datasets.importing.options import DatasetError

# The hub's repository ids: a name, or an owner and a name, each starting with a letter or digit; no "..", so that no
# id can be read as a path (datasets.load_dataset tries a local folder of the id's name before the hub).
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def hub_id_problem(hub_id: str) -> str | None:
    """Why ``hub_id`` is not a hub dataset id, or None."""
    if len(hub_id) > 200 or not HUB_ID.fullmatch(hub_id) or ".." in hub_id:
        return (
            "a hub id looks like 'name' or 'owner/name' (letters, digits, '.', '-', '_'); local data comes "
            "through the import folders (Local path)"
        )
    return None


HUB_PROBE_SECONDS = 3.0  # datasets' own retries took 31.5 s to fail where the network drops packets


def hub_unreachable(timeout: float = HUB_PROBE_SECONDS) -> str | None:
    """Why the hub (HF_ENDPOINT, or the proxy the process would go through) takes no connection within ``timeout``
    seconds, name lookup included; None when it does. One connect, nothing sent."""
    from huggingface_hub import constants  # only for a hub import: the web process loads it lazily

    endpoint = urlsplit(constants.ENDPOINT)
    proxy = urllib.request.getproxies().get(endpoint.scheme)
    if proxy and not urllib.request.proxy_bypass(endpoint.hostname or ""):
        endpoint = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    host, port = endpoint.hostname or "", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    failure: list[str] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as exc:
            failure.append(f"{type(exc).__name__}: {exc}")
        else:
            failure.append("")

    # in a thread: a name lookup is not bounded by the socket's timeout
    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(timeout)
    if not failure:
        return f"{host}:{port} did not answer within {timeout:g} s"
    return f"{host}:{port}: {failure[0]}" if failure[0] else None


def load_hf(*, local_path: Path | None = None, hub_id: str = "", config: str = "", split: str = "", cache_dir: Path):
    """A ``datasets.Dataset`` from a folder saved with ``save_to_disk``, a data folder, or the hub (online only)."""
    import datasets

    datasets.disable_progress_bars()
    try:
        if local_path is not None:
            saved = (
                (local_path / "dataset_info.json").exists()
                or (local_path / "dataset_dict.json").exists()
                or (local_path / "state.json").exists()
            )
            loaded = (
                datasets.load_from_disk(str(local_path))
                if saved
                else datasets.load_dataset(str(local_path), cache_dir=str(cache_dir))
            )
            where = local_path.name
        else:
            problem = hub_id_problem(hub_id)
            if problem or Path(hub_id).exists():  # the loader runs in an empty folder: nothing local has this name
                raise DatasetError([f"hub id: {problem or 'not a hub id'}"])
            if hub_offline():
                raise DatasetError(
                    [
                        f"cannot reach the Hugging Face hub for '{hub_id}': this server runs offline "
                        f"(HF_HUB_OFFLINE=1); import a local copy by path instead"
                    ]
                )
            unreachable = hub_unreachable()
            if unreachable:
                raise DatasetError(
                    [
                        f"cannot reach the Hugging Face hub for '{hub_id}' ({unreachable}); import a local copy "
                        f"by path instead"
                    ]
                )
            loaded = datasets.load_dataset(hub_id, config or None, split=split or None, cache_dir=str(cache_dir))
            where = hub_id
    except DatasetError:
        raise
    except Exception as exc:  # datasets raises many kinds; all mean "this source cannot be loaded"
        kinds = " ".join(cls.__name__ for cls in type(exc).__mro__)
        if hub_id and any(word in kinds for word in ("Connection", "Timeout", "OfflineModeIsEnabled")):
            raise DatasetError(
                [
                    f"cannot reach the Hugging Face hub for '{hub_id}' ({type(exc).__name__}): is this "
                    f"server offline? Import a local copy by path instead"
                ]
            ) from None
        raise DatasetError([f"cannot load '{hub_id or local_path.name}': {type(exc).__name__}: {exc}"]) from None
    if isinstance(loaded, (datasets.DatasetDict, dict)):
        names = list(loaded)
        chosen = split or ("train" if "train" in names else (names[0] if len(names) == 1 else ""))
        if chosen not in names:
            raise DatasetError([f"'{where}' has splits {', '.join(names)}; choose one"])
        loaded = loaded[chosen]
    return loaded


def hf_batches(ds) -> tuple[Iterator[pa.RecordBatch], pa.Schema]:
    table = ds.with_format("arrow")
    schema = table[:0].schema

    def batches():
        for chunk in table.iter(batch_size=65536):
            yield from chunk.to_batches()

    return batches(), schema
