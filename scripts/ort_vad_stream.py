#!/usr/bin/env python3
"""silero-vad over a WAV file on onnxruntime, the way silero's own `OnnxWrapper` streams it: 16 kHz audio in
pieces of 512 samples, each preceded by the 64 samples before it (zeros at the start), the last piece zero-padded,
the LSTM state (`state` → `stateN`) carried from piece to piece. Writes OUT_DIR/probs.npy (`[pieces, 1, 1]`) and
OUT_DIR/state.npy (the final state): the peer of `tpu-sdk run --chunk 512 --context 64 --state-from stateN=state`.

usage: ort_vad_stream.py MODEL.onnx AUDIO.wav OUT_DIR
"""
import os
import sys
import wave

import numpy as np
import onnxruntime as ort


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model, audio, out = sys.argv[1:]
    with wave.open(audio) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(64, np.float32)
    sr = np.array(16000, np.int64)
    probs = []
    for start in range(0, len(x), 512):
        piece = x[start:start + 512]
        piece = np.pad(piece, (0, 512 - len(piece)))
        inp = np.concatenate([context, piece])[None]
        p, state = s.run(None, {"input": inp, "state": state, "sr": sr})
        context = piece[-64:]
        probs.append(p)
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "probs.npy"), np.stack(probs).astype(np.float32))
    np.save(os.path.join(out, "state.npy"), state)


if __name__ == "__main__":
    main()
