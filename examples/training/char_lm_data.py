#!/usr/bin/env python3
"""The text of the character-level language model demo: the Book of Genesis
from Debian's bible-kjv-text (read with bible-kjv's `bible`), with chapter
headings and verse numbers removed and whitespace collapsed. Cut into
sequences of T + 1 characters (non-overlapping): the first T are the input,
the last T the target. The first 90 % of the text trains, the rest
validates. Writes one-hot tensors `tokens`, `target` : [sequences, T, V]
(float32) to TRAIN and VAL, and the alphabet to VOCAB (one line, JSON).

Usage: char_lm_data.py TRAIN.safetensors VAL.safetensors VOCAB.json [T]
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'e2e', 'training'))
import safetensors_io  # noqa: E402


def genesis():
    try:
        text = subprocess.run(['bible', 'gen1:1-gen50:26'], capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit('cannot read the text (%s): install bible-kjv and bible-kjv-text '
                 '(apt-get install bible-kjv bible-kjv-text)' % error)
    lines = [line for line in text.splitlines() if not re.match(r'^Genesis \d+$', line)]
    text = re.sub(r'(^|\s)\d+ ', ' ', ' '.join(lines))
    return re.sub(r'\s+', ' ', text).strip()


def one_hot(text, alphabet, t):
    index = {c: i for i, c in enumerate(alphabet)}
    codes = np.array([index[c] for c in text])
    count = (len(codes) - 1) // t
    inputs = codes[:count * t].reshape(count, t)
    targets = codes[1:count * t + 1].reshape(count, t)
    eye = np.eye(len(alphabet), dtype=np.float32)
    return eye[inputs], eye[targets]


def main():
    train_path, val_path, vocab_path = sys.argv[1:4]
    t = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    text = genesis()
    alphabet = sorted(set(text))
    split = int(0.9 * len(text))
    train = one_hot(text[:split], alphabet, t)
    val = one_hot(text[split:], alphabet, t)
    safetensors_io.write(train_path, {'tokens': train[0], 'target': train[1]},
                         dtype=np.float32)
    safetensors_io.write(val_path, {'tokens': val[0], 'target': val[1]}, dtype=np.float32)
    with open(vocab_path, 'w') as f:
        json.dump(alphabet, f)
    print('%d characters, alphabet of %d; %d training and %d validation sequences of %d' % (
        len(text), len(alphabet), len(train[0]), len(val[0]), t))


if __name__ == '__main__':
    main()
