"""What every reader shares: the options and limits of an import, its result, and the error that names the lines."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_ERRORS = 20
MAX_EXPANSION = 100  # decompressed bytes per compressed byte, beyond which an input is treated as a bomb
EXPANSION_FREE_BYTES = 64 * 1024**2  # small inputs may expand more (a short, repetitive file compresses very well)
BLOCK_BYTES = 4 * 1024**2  # pyarrow read block; also the target size of one Parquet row group


@dataclass
class DatasetError(Exception):
    errors: list[str] = field(default_factory=list)

    def __str__(self):
        return "; ".join(self.errors)


@dataclass(frozen=True)
class ImportOptions:
    prompt_column: str = "prompt"
    # a column of worked solutions ending in "#### <answer>" (GSM8K): the answer is parsed into 'answer', the full
    # text kept in 'solution' (or, when the column has another name, left in that column)
    gsm8k_column: str = ""
    max_bytes: int = 2 * 1024**3
    max_columns: int = 1000  # columns in one row
    max_field_bytes: int = 4 * 1024**2  # one text value (a cell, or a text inside a list or object)
    max_depth: int = 32  # lists and objects inside each other (a list of messages is 2 deep)
    precise: bool = False  # skip the fast road (pyarrow's readers): the row by row road only
    progress_path: str = ""  # where the rows written so far are noted, for a caller watching from another process


@dataclass
class ImportResult:
    format: str
    columns: list[str]
    column_types: dict[str, str]
    row_count: int
    nbytes: int
