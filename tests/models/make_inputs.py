#!/usr/bin/python3
"""Builds the deterministic real inputs of the real-model tests as .npy files.

Usage: /usr/bin/python3 tests/models/make_inputs.py OUTPUT_DIR

Sources are Debian-packaged data (python3-skimage photos, pocketsphinx-testdata speech), so the
inputs are regenerated at test time instead of being committed. Everything here is plain numpy
(bilinear resize included) so the bytes do not depend on the skimage or scipy version; the only
library call on the data path is the PNG decoder, which is lossless.

Files written (names are those listed in tests/models/models.json):
  det_x.npy          float32 [1,3,192,384]  PP-OCRv4 det: the `page` photo, PaddleOCR normalization
  rec_x.npy          float32 [1,3,48,320]   PP-OCRv4 rec: the title line of `page`, (x/255-0.5)/0.5
  cls_x.npy          float32 [1,3,48,192]   PP-OCR cls: the same crop at 48x192
  blazeface128_x.npy float32 [1,128,128,3]  BlazeFace front: `astronaut`, NHWC in [-1,1]
  blazeface256_x.npy float32 [1,256,256,3]  BlazeFace back: `astronaut`, NHWC in [-1,1]
  silero_input_K.npy float32 [1,576]        Silero VAD: chunk K (0..7) of a LibriVox recording: 512 new
                                            samples after the 64 that precede them, as Silero v5's own
                                            wrappers feed it (the model keeps no audio context itself)
  silero_state.npy   float32 [2,1,128]      zeros: the initial LSTM state
  silero_sr.npy      int64   []             16000
"""
import os
import sys
import wave

import numpy as np

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
SPEECH_WAV = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav"

# The text line "Region-based segm..." of page.png (191x384): rows and columns of the crop.
TITLE_ROWS = (6, 42)
TITLE_COLS = (0, 240)
# Four near-silent chunks followed by four chunks of speech onset (found from the RMS envelope): the
# speech probability goes from ~0.01 to ~0.95, so the state carried across chunks matters.
SILERO_FIRST_SAMPLE = 2048
SILERO_CHUNKS = 8
SILERO_CHUNK = 512
SILERO_CONTEXT = 64


def read_png(name):
    # Imported here so that a missing skimage gives a clear message, not an import-time traceback.
    try:
        import skimage.io
    except ImportError:
        sys.exit("make_inputs.py: needs python3-skimage (apt-get install python3-skimage)")
    return skimage.io.imread(os.path.join(SKIMAGE_DATA, name))


def resize_bilinear(image, height, width):
    """Bilinear resize of an HxW or HxWxC array with half-pixel centers and edge clamping
    (what OpenCV's INTER_LINEAR and skimage's order=1 without anti-aliasing compute), in float64."""
    image = np.asarray(image, dtype=np.float64)
    in_h, in_w = image.shape[:2]

    def taps(out_size, in_size):
        pos = (np.arange(out_size) + 0.5) * (in_size / out_size) - 0.5
        pos = np.clip(pos, 0, in_size - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, in_size - 1)
        return lo, hi, pos - lo

    y0, y1, wy = taps(height, in_h)
    x0, x1, wx = taps(width, in_w)
    if image.ndim == 3:
        wy = wy[:, None, None]
        wx = wx[None, :, None]
    else:
        wy = wy[:, None]
        wx = wx[None, :]
    top = image[y0][:, x0] * (1 - wx) + image[y0][:, x1] * wx
    bottom = image[y1][:, x0] * (1 - wx) + image[y1][:, x1] * wx
    return top * (1 - wy) + bottom * wy


def gray_to_rgb(image):
    return np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image[:, :, :3]


def to_nchw(image_hwc):
    return np.ascontiguousarray(image_hwc.transpose(2, 0, 1)[None]).astype(np.float32)


def det_input(page):
    # PaddleOCR's det preprocessing: RGB in [0,1], ImageNet mean/std. 192x384 keeps page's aspect
    # ratio (191x384) with both sides multiples of 32, as the detector requires.
    image = resize_bilinear(gray_to_rgb(page), 192, 384) / 255.0
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    return to_nchw((image - mean) / std)


def line_input(page, width):
    crop = page[TITLE_ROWS[0]:TITLE_ROWS[1], TITLE_COLS[0]:TITLE_COLS[1]]
    image = resize_bilinear(gray_to_rgb(crop), 48, width) / 255.0
    return to_nchw((image - 0.5) / 0.5)


def blazeface_input(photo, size):
    image = resize_bilinear(photo[:, :, :3], size, size)
    return (image / 127.5 - 1.0)[None].astype(np.float32)


def silero_chunks():
    with wave.open(SPEECH_WAV) as speech:
        if speech.getframerate() != 16000 or speech.getnchannels() != 1 or speech.getsampwidth() != 2:
            sys.exit(f"make_inputs.py: {SPEECH_WAV}: expected 16 kHz mono 16-bit PCM")
        pcm = np.frombuffer(speech.readframes(speech.getnframes()), dtype="<i2")
    audio = pcm.astype(np.float32) / 32768.0
    starts = [SILERO_FIRST_SAMPLE + k * SILERO_CHUNK for k in range(SILERO_CHUNKS)]
    return [audio[start - SILERO_CONTEXT:start + SILERO_CHUNK][None] for start in starts]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_inputs.py OUTPUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(SPEECH_WAV):
        sys.exit(f"make_inputs.py: {SPEECH_WAV} missing (apt-get install pocketsphinx-testdata)")

    page = read_png("page.png")
    astronaut = read_png("astronaut.png")
    arrays = {
        "det_x": det_input(page),
        "rec_x": line_input(page, 320),
        "cls_x": line_input(page, 192),
        "blazeface128_x": blazeface_input(astronaut, 128),
        "blazeface256_x": blazeface_input(astronaut, 256),
        "silero_state": np.zeros((2, 1, 128), dtype=np.float32),
        "silero_sr": np.array(16000, dtype=np.int64),
    }
    for k, chunk in enumerate(silero_chunks()):
        arrays[f"silero_input_{k}"] = np.ascontiguousarray(chunk, dtype=np.float32)
    for name, array in arrays.items():
        np.save(os.path.join(out, name + ".npy"), array)


if __name__ == "__main__":
    main()
