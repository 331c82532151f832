"""pycoral.utils.dataset."""

import re
from typing import Dict


def read_label_file(file_path: str) -> Dict[int, str]:
    """Reads a label file into ``{id: label}``: lines ``ID:label`` or ``ID label`` give their ids; a line
    without a leading number is labelled by its row number (as pycoral does)."""
    labels: Dict[int, str] = {}
    with open(file_path, "r", encoding="utf-8") as f:
        for row, line in enumerate(f):
            text = line.strip()
            parts = re.split(r"[:\s]+", text, maxsplit=1)
            if len(parts) == 2 and parts[0].strip().isdigit():
                labels[int(parts[0])] = parts[1].strip()
            else:
                labels[row] = text
    return labels
