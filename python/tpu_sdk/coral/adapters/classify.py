"""pycoral.adapters.classify: the top classes of a classification model's output."""

import collections
from typing import Any, List

import numpy as np

from tpu_sdk.coral.adapters import common as _common  # noqa: F401  (pycoral's module layout)

Class = collections.namedtuple("Class", ["id", "score"])
"""A class id and its score."""


def num_classes(interpreter: Any) -> int:
    """The number of classes: the element count of output 0."""
    return int(np.prod(interpreter.get_output_details()[0]["shape"]))


def get_scores(interpreter: Any) -> np.ndarray:
    """Output 0, flattened; an integer output is dequantized (``scale * (q - zero_point)``, in float64)."""
    d = interpreter.get_output_details()[0]
    data = interpreter.tensor(d["index"])().flatten()
    if np.issubdtype(d["dtype"], np.integer):
        scale, zero_point = d["quantization"]
        return scale * (data.astype(np.int64) - zero_point)
    return data.copy()


def get_classes_from_scores(scores: np.ndarray, top_k: float = float("inf"), score_threshold: float = -float("inf")) -> List[Class]:
    """The ``top_k`` highest ``scores`` that are at least ``score_threshold``, as Class(id, score), best first."""
    k = int(min(top_k, len(scores)))
    if k <= 0:
        return []
    best = np.argpartition(scores, -k)[-k:]
    found = [Class(int(i), scores[i]) for i in best if scores[i] >= score_threshold]
    return sorted(found, key=lambda c: c.score, reverse=True)


def get_classes(interpreter: Any, top_k: float = float("inf"), score_threshold: float = -float("inf")) -> List[Class]:
    """The top classes of the last invoke (see :func:`get_classes_from_scores`)."""
    return get_classes_from_scores(get_scores(interpreter), top_k, score_threshold)
