"""Writes a 16 kHz mono 16-bit WAV of synthetic speech with pauses: the input of the streaming VAD test and example.

    python scripts/make_speech_wav.py OUT.wav

Two sentences spoken by espeak-ng (`apt-get install espeak-ng`), resampled from its 22050 Hz to 16 kHz, with 1 s of
quiet room noise before, between (1.5 s) and after them. The file in cli/tests/data/speech_16k.wav was made so.
"""
import subprocess
import sys
import tempfile
import wave

import numpy as np
from scipy.signal import resample_poly


def speak(text):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        subprocess.run(["espeak-ng", "-s", "150", "-w", f.name, text], check=True)
        with wave.open(f.name) as w:
            rate = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float64) / 32768
    return resample_poly(x, 16000, rate) if rate != 16000 else x


def main(out):
    rng = np.random.default_rng(0)
    quiet = lambda s: rng.normal(0, 0.003, int(16000 * s))  # noqa: E731
    parts = [quiet(1.0), speak("Hello. This is a test of the voice activity detector."), quiet(1.5),
             speak("It should find two segments of speech, with a pause between them."), quiet(1.0)]
    x = np.clip(np.concatenate(parts), -1, 1)
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    print(f"{out}: {len(x) / 16000:.2f} s; speech at "
          f"{len(parts[0]) / 16000:.2f}-{(len(parts[0]) + len(parts[1])) / 16000:.2f} s and "
          f"{sum(map(len, parts[:3])) / 16000:.2f}-{sum(map(len, parts[:4])) / 16000:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1])
