"""What a file is: its type from its name, its first bytes, whether it is UTF-8 text; and gzip and zip unpacked
within the size limit and the expansion ratio of a compression bomb."""

from __future__ import annotations

import codecs
import gzip
import zipfile
import zlib
from pathlib import Path

from runs.datasets.importing.options import BLOCK_BYTES, EXPANSION_FREE_BYTES, MAX_EXPANSION, DatasetError

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
FORMAT_NAMES = {"jsonl": "JSON lines", "json": "JSON", "csv": "CSV", "parquet": "a Parquet file"}
REFUSED_ARCHIVES = (".tar", ".tgz", ".7z", ".rar", ".bz2", ".xz", ".zst", ".lz4", ".br")
MAGIC = [  # (offset, bytes, what it is)
    (0, b"\x1f\x8b", "gzip"),
    (0, b"PK\x03\x04", "zip"),
    (0, b"PK\x05\x06", "zip"),
    (0, b"PAR1", "parquet"),
    (0, b"\x89PNG", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF8", "a GIF image"),
    (0, b"%PDF", "a PDF document"),
    (0, b"BZh", "a bzip2 archive"),
    (0, b"\xfd7zXZ\x00", "an xz archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!", "a RAR archive"),
    (0, b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (0, b"ARROW1", "an Arrow file"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (257, b"ustar", "a tar archive"),
    (0, b"\xff\xfe", "UTF-16 text"),
    (0, b"\xfe\xff", "UTF-16 text"),
]


def type_from_name(name: str) -> tuple[str, str]:
    """(compression, format) from the file name: ('gzip', 'jsonl') for rows.jsonl.gz; format '' for a zip."""
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip", ""
    compression = ""
    if lower.endswith(".gz"):
        compression, lower = "gzip", lower[:-3]
    if lower.endswith(REFUSED_ARCHIVES) or lower.endswith((".gz", ".zip")):
        raise DatasetError(
            [
                f"{name}: archives of this kind are not accepted; upload the .jsonl, .json, .csv or "
                f".parquet file itself, or one of them gzipped (.gz) or alone in a .zip"
            ]
        )
    for ext, fmt in FORMATS.items():
        if lower.endswith(ext):
            return compression, fmt
    raise DatasetError(
        [f"{name}: unsupported file type; upload .jsonl, .json, .csv or .parquet (optionally .gz, or alone in a .zip)"]
    )


def _sniff(path: Path) -> str:
    """What the first bytes say the file is: 'gzip', 'zip', 'parquet', 'text', or a description."""
    with open(path, "rb") as fh:
        head = fh.read(8192)
    for offset, magic, what in MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return what
    return "binary data" if b"\x00" in head else "text"


def expect(path: Path, filename: str, kind: str, problem: str) -> None:
    what = _sniff(path)
    if what == kind:
        return
    if what == "UTF-16 text":
        raise DatasetError([f"{filename} is UTF-16 text; save it as UTF-8"])
    looks = {"gzip": "a gzip file", "zip": "a zip archive", "parquet": "a Parquet file"}.get(what, what)
    raise DatasetError([f"{filename} {problem}: it looks like {looks}"])


def first_utf8_problem(path: Path) -> tuple[str, str] | None:
    """Text formats must be UTF-8 throughout: where the first bad byte is, as a person counts (``line 3, column 7``:
    1-based, in characters), and the problem; None when the file is all UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, line_start, offset = 1, 0, 0  # offset: bytes of the file before this chunk
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            pending = len(decoder.getstate()[0])  # the start of a character cut by the last chunk's end
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                bad = offset + exc.start - pending
                before = chunk[: max(exc.start - pending, 0)]
                newlines = before.count(b"\n")
                if newlines:
                    line_start = offset + before.rindex(b"\n") + 1
                return f"line {line + newlines}, column {_column(fh, line_start, bad)}", NOT_UTF8
            if not chunk:
                return None
            newlines = chunk.count(b"\n")
            if newlines:
                line += newlines
                line_start = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)


NOT_UTF8 = "not UTF-8 text"


def _column(fh, line_start: int, bad: int) -> int:
    """The column of the file's byte ``bad`` in the line starting at byte ``line_start``: the characters before it
    (valid UTF-8, read again in blocks; a byte-order mark is not one) plus one."""
    fh.seek(line_start)
    decoder = codecs.getincrementaldecoder("utf-8-sig" if line_start == 0 else "utf-8")()
    chars, left = 0, bad - line_start
    while left > 0:
        piece = fh.read(min(left, BLOCK_BYTES))
        left -= len(piece)
        chars += len(decoder.decode(piece, final=left <= 0 or not piece))
        if not piece:
            break
    return chars + 1


def utf8_column(line: bytes, bad: int) -> int:
    """The column (1-based, in characters) of byte ``bad`` of ``line``, the first byte that is not UTF-8."""
    return len(line[:bad].decode("utf-8")) + 1


def json_problem(msg: str) -> str:
    """Python's json message as a sentence beside its line and column ("Unterminated string starting at" names a
    position the caller already gives)."""
    return f"not valid JSON ({msg.removesuffix(' at') + ' here' if msg.endswith(' at') else msg})"


def is_blank(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(65536)
        return not head.strip(b" \t\r\n\xef\xbb\xbf") and not fh.read(1)


def _copy_capped(src, out, filename: str, max_bytes: int, compressed_size) -> None:
    """Copy a decompressing stream, stopping at the size limit or at a bomb's expansion ratio."""
    total = 0
    while chunk := src.read(1024**2):
        total += len(chunk)
        if total > max_bytes:
            raise DatasetError([f"{filename} decompresses to more than {max_bytes} bytes, the limit"])
        if total > EXPANSION_FREE_BYTES and total > MAX_EXPANSION * max(compressed_size(), 1):
            raise DatasetError(
                [
                    f"{filename} expands more than {MAX_EXPANSION} times when decompressed; "
                    f"it looks like a compression bomb"
                ]
            )
        out.write(chunk)


def gunzip(source: Path, out_path: Path, filename: str, max_bytes: int) -> Path:
    try:
        with open(source, "rb") as raw, gzip.GzipFile(fileobj=raw) as gz, open(out_path, "wb") as out:
            _copy_capped(gz, out, filename, max_bytes, raw.tell)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError([f"{filename} is not a valid gzip file ({exc})"]) from None
    return out_path


def unzip(source: Path, out_path: Path, filename: str, max_bytes: int) -> tuple[Path, str]:
    try:
        with zipfile.ZipFile(source) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
            if len(members) != 1:
                raise DatasetError([f"{filename} must hold exactly one data file; it holds {len(members)}"])
            member = members[0]
            compression, fmt = type_from_name(member.filename)
            if compression:
                raise DatasetError([f"{filename}: nested archives are not accepted ({member.filename})"])
            if member.flag_bits & 0x1:
                raise DatasetError([f"{filename}: {member.filename} is encrypted"])
            if member.file_size > max_bytes:
                raise DatasetError(
                    [
                        f"{filename}: {member.filename} is {member.file_size} bytes uncompressed; "
                        f"the limit is {max_bytes}"
                    ]
                )
            if member.file_size > EXPANSION_FREE_BYTES and member.file_size > MAX_EXPANSION * member.compress_size:
                raise DatasetError(
                    [
                        f"{filename} expands more than {MAX_EXPANSION} times when decompressed; "
                        f"it looks like a compression bomb"
                    ]
                )
            with archive.open(member) as src, open(out_path, "wb") as out:
                # the sizes in the header may lie: count what really comes out
                _copy_capped(src, out, filename, max_bytes, lambda: member.compress_size)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise DatasetError([f"{filename} is not a valid zip archive ({exc})"]) from None
    return out_path, fmt
