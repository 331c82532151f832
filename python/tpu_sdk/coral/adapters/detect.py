"""pycoral.adapters.detect: objects from an SSD detection model's postprocess outputs."""

import collections
from typing import Any, Callable, List, Tuple

from tpu_sdk.coral.adapters import common

Object = collections.namedtuple("Object", ["id", "score", "bbox"])
"""A detected object: class id, score and :class:`BBox`."""


class BBox(collections.namedtuple("BBox", ["xmin", "ymin", "xmax", "ymax"])):
    """A box, (xmin, ymin) to (xmax, ymax)."""

    __slots__ = ()

    @property
    def width(self) -> Any:
        return self.xmax - self.xmin

    @property
    def height(self) -> Any:
        return self.ymax - self.ymin

    @property
    def area(self) -> Any:
        return self.width * self.height

    @property
    def valid(self) -> bool:
        """Whether xmin <= xmax and ymin <= ymax."""
        return self.width >= 0 and self.height >= 0

    def scale(self, sx: float, sy: float) -> "BBox":
        return BBox(xmin=sx * self.xmin, ymin=sy * self.ymin, xmax=sx * self.xmax, ymax=sy * self.ymax)

    def translate(self, dx: float, dy: float) -> "BBox":
        return BBox(xmin=dx + self.xmin, ymin=dy + self.ymin, xmax=dx + self.xmax, ymax=dy + self.ymax)

    def map(self, f: Callable[[Any], Any]) -> "BBox":
        return BBox(xmin=f(self.xmin), ymin=f(self.ymin), xmax=f(self.xmax), ymax=f(self.ymax))

    @staticmethod
    def intersect(a: "BBox", b: "BBox") -> "BBox":
        return BBox(xmin=max(a.xmin, b.xmin), ymin=max(a.ymin, b.ymin), xmax=min(a.xmax, b.xmax), ymax=min(a.ymax, b.ymax))

    @staticmethod
    def union(a: "BBox", b: "BBox") -> "BBox":
        return BBox(xmin=min(a.xmin, b.xmin), ymin=min(a.ymin, b.ymin), xmax=max(a.xmax, b.xmax), ymax=max(a.ymax, b.ymax))

    @staticmethod
    def iou(a: "BBox", b: "BBox") -> float:
        """Intersection over union (0.0 when they do not overlap)."""
        i = BBox.intersect(a, b)
        if not i.valid:
            return 0.0
        return i.area / (a.area + b.area - i.area)


def get_objects(interpreter: Any, score_threshold: float = -float("inf"), image_scale: Tuple[float, float] = (1.0, 1.0)) -> List[Object]:
    """The detections of the last invoke whose score is at least ``score_threshold``.

    Reads TFLite_Detection_PostProcess's four outputs: when output 3 holds one value, the order is boxes,
    classes, scores, count (TF1 SSD models); otherwise scores, boxes, count, classes (TF2 exports). Boxes are
    (ymin, xmin, ymax, xmax) in [0, 1]; each is scaled by the input's (width, height) divided by
    ``image_scale`` (the factor the image was resized by, as :func:`common.set_resized_input` returns it) and
    truncated to int. Every detection slot is considered (``count`` is read as pycoral reads it).
    """
    signatures = interpreter._get_full_signature_list()
    if signatures:
        if len(signatures) > 1:
            raise ValueError("Only support model with one signature.")
        outs = signatures[next(iter(signatures))]["outputs"]
        count = int(interpreter.tensor(outs["output_0"])()[0])
        scores = interpreter.tensor(outs["output_1"])()[0]
        class_ids = interpreter.tensor(outs["output_2"])()[0]
        boxes = interpreter.tensor(outs["output_3"])()[0]
    elif common.output_tensor(interpreter, 3).size == 1:
        boxes = common.output_tensor(interpreter, 0)[0]
        class_ids = common.output_tensor(interpreter, 1)[0]
        scores = common.output_tensor(interpreter, 2)[0]
        count = int(common.output_tensor(interpreter, 3)[0])
    else:
        scores = common.output_tensor(interpreter, 0)[0]
        boxes = common.output_tensor(interpreter, 1)[0]
        count = int(common.output_tensor(interpreter, 2)[0])
        class_ids = common.output_tensor(interpreter, 3)[0]
    del count  # pycoral reads it but considers every slot (len(scores))

    width, height = common.input_size(interpreter)
    sx, sy = width / image_scale[0], height / image_scale[1]

    def make(i: int) -> Object:
        ymin, xmin, ymax, xmax = boxes[i]
        box = BBox(xmin=xmin, ymin=ymin, xmax=xmax, ymax=ymax).scale(sx, sy).map(int)
        return Object(id=int(class_ids[i]), score=float(scores[i]), bbox=box)

    return [make(i) for i in range(len(scores)) if scores[i] >= score_threshold]
