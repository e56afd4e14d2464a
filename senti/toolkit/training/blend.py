"""Weight-space interpolation between a continued model's parent and its best child (WiSE-FT: Wortsman et al.,
"Robust fine-tuning of zero-shot models", CVPR 2022): `senti train --model PARENT --interpolate auto|SHARE`.

A child fine-tuned on a few dozen labels moves the whole encoder on a handful of rows; the parent's weights plus a
share of the child's change keep most of what the parent knew and much of what the labels taught. Each blend is
judged as a child is (toolkit.training.run.ClassifierRun.blend_with_parent): it must beat the parent on the new
dev labels and stay within the margin on the parent's own dev split. Measured on the far domains
(docs/results/far-domains.md, "A few labels of a new shop").
"""

from __future__ import annotations

import numpy as np

AUTO_SHARES = (0.25, 0.5, 0.75)  # the child's share of each blend `auto` tries (the child itself is 1)
# The default, `few`: the half blend where it was measured to keep a few labels from costing the parent (a
# pretrained parent, fewer new dev texts than SMALL_DEV: from e5-small no run of 21 lost more than half a point with
# it, three did without), else off (from a scratch parent it halved the gains).
FEW = "few"
FEW_SHARE = "0.5"
RULE = ("interpolate must be few, off, auto or the child's share of the blend, a number between 0 and 1 "
        "(exclusive)")


def blend_shares(setting: str) -> tuple[float, ...]:
    """The child's shares to try: none (off), AUTO_SHARES (auto), or the one given. Raises ValueError with RULE."""
    if setting in ("off", FEW):  # `few` is resolved (`for_parent`) before any blend is tried
        return ()
    if setting == "auto":
        return AUTO_SHARES
    try:
        share = float(setting)
    except ValueError:
        raise ValueError(RULE) from None
    if not 0 < share < 1:
        raise ValueError(RULE)
    return (share,)


def for_parent(setting: str, pretrained_parent: bool, small_dev: bool) -> str:
    """The setting a run uses: `few` resolved for its parent (the half blend for a pretrained parent and a small new
    dev set, else off); any other as given."""
    if setting != FEW:
        return setting
    return FEW_SHARE if pretrained_parent and small_dev else "off"


def valid_setting(setting: str) -> bool:
    try:
        blend_shares(setting)
    except ValueError:
        return False
    return True


def weights(model) -> dict[str, np.ndarray]:
    """A copy of the model's parameters and buffers, by name."""
    return {name: np.array(tensor.numpy(), copy=True) for name, tensor in model.state_dict().items()}


def blended(parent: dict[str, np.ndarray], child: dict[str, np.ndarray], share: float) -> dict[str, np.ndarray]:
    """parent + share x (child - parent) for each floating tensor; others (integer buffers) as the child has them."""
    return {name: (p + share * (child[name] - p)).astype(p.dtype) if np.issubdtype(p.dtype, np.floating)
            else child[name] for name, p in parent.items()}
