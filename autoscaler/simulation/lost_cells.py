"""Rows read without a requests value, placed on the trace's grid: apart from trace_file.py and lost_scrapes.py,
whose readers refuse a file by its packing, text or header before numpy is imported."""

from __future__ import annotations

from typing import Final, NamedTuple

import numpy as np


class LostCells(NamedTuple):
    """Rows whose requests is empty, NaN or null as the trace's intervals (`slot`), models (`model`: -1 for a model
    with no other row) and file lines: what the checks for missing rows leave to `LostScrapes`' warning."""

    slot: np.ndarray
    model: np.ndarray
    line: np.ndarray


NO_CELLS: Final = LostCells(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
