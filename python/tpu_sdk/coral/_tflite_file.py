"""What :class:`tpu_sdk.coral.interpreter.Interpreter` needs from a ``.tflite`` file itself: the tensor numbers of
the main subgraph's inputs and outputs, and the signature defs, so that tensor indices and
``_get_full_signature_list()`` are the ones tflite_runtime reports.

A minimal FlatBuffers reader over the published TFLite schema (tensorflow/lite/schema/schema.fbs): ``Model``
fields 2 (``subgraphs``) and 7 (``signature_defs``), ``SubGraph`` fields 0-2 (``tensors``, ``inputs``,
``outputs``) and 4 (``name``), ``Tensor`` field 3 (``name``), ``SignatureDef`` fields 0, 1, 2, 4 (``inputs``,
``outputs``, ``signature_key``, ``subgraph_index``), ``TensorMap`` fields 0-1 (``name``, ``tensor_index``).
Any inconsistency raises ``ValueError``; the caller then falls back to positional indices.
"""

import struct
from typing import Dict, List, NamedTuple, Optional


class TfliteIo(NamedTuple):
    inputs: List[int]
    outputs: List[int]
    tensor_names: Dict[int, str]
    # signature key -> {"inputs": {name: tensor index}, "outputs": {name: tensor index}, "subgraph_index": int}
    signatures: Dict[str, Dict[str, object]]


class _Buf:
    def __init__(self, data: bytes) -> None:
        self.d = data

    def _read(self, fmt: str, at: int) -> int:
        if not 0 <= at <= len(self.d) - struct.calcsize(fmt):
            raise ValueError("offset out of the file")
        return struct.unpack_from(fmt, self.d, at)[0]

    def u32(self, at: int) -> int:
        return self._read("<I", at)

    def i32(self, at: int) -> int:
        return self._read("<i", at)

    def u16(self, at: int) -> int:
        return self._read("<H", at)

    def field(self, table: int, index: int) -> Optional[int]:
        """The absolute position of field ``index`` of the table at ``table``, or None when absent."""
        vtable = table - self.i32(table)
        vsize = self.u16(vtable)
        slot = 4 + 2 * index
        if slot + 2 > vsize:
            return None
        off = self.u16(vtable + slot)
        return table + off if off else None

    def indirect(self, at: int) -> int:
        return at + self.u32(at)

    def table(self, table: int, index: int) -> Optional[int]:
        at = self.field(table, index)
        return None if at is None else self.indirect(at)

    def vector(self, table: int, index: int) -> List[int]:
        """Positions of a vector's elements (4-byte elements: offsets or ints)."""
        at = self.field(table, index)
        if at is None:
            return []
        v = self.indirect(at)
        n = self.u32(v)
        if n > (len(self.d) - v) // 4:
            raise ValueError("vector longer than the file")
        return [v + 4 + 4 * k for k in range(n)]

    def ints(self, table: int, index: int) -> List[int]:
        return [self.i32(p) for p in self.vector(table, index)]

    def tables(self, table: int, index: int) -> List[int]:
        return [self.indirect(p) for p in self.vector(table, index)]

    def string(self, table: int, index: int) -> Optional[str]:
        at = self.field(table, index)
        if at is None:
            return None
        s = self.indirect(at)
        n = self.u32(s)
        if n > len(self.d) - s - 4:
            raise ValueError("string longer than the file")
        return self.d[s + 4 : s + 4 + n].decode("utf-8", "replace")

    def uint(self, table: int, index: int, default: int = 0) -> int:
        at = self.field(table, index)
        return default if at is None else self.u32(at)


def read_io(data: bytes) -> TfliteIo:
    """The main subgraph's input/output tensor numbers, their names, and the signature defs of a TFLite file."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError("not a TFLite flatbuffer (no TFL3 identifier)")
    b = _Buf(data)
    model = b.indirect(0)
    subgraphs = b.tables(model, 2)
    if not subgraphs:
        raise ValueError("no subgraph")
    sg = subgraphs[0]
    tensors = b.tables(sg, 0)
    inputs, outputs = b.ints(sg, 1), b.ints(sg, 2)
    names: Dict[int, str] = {}
    for t in inputs + outputs:
        if not 0 <= t < len(tensors):
            raise ValueError(f"tensor {t} out of range")
        names[t] = b.string(tensors[t], 3) or ""
    signatures: Dict[str, Dict[str, object]] = {}
    for sd in b.tables(model, 7):
        key = b.string(sd, 2) or ""
        sig: Dict[str, object] = {"subgraph_index": b.uint(sd, 4)}
        for field, part in ((0, "inputs"), (1, "outputs")):
            sig[part] = {(b.string(tm, 0) or ""): b.uint(tm, 1) for tm in b.tables(sd, field)}
        signatures[key] = sig
    return TfliteIo(inputs, outputs, names, signatures)
