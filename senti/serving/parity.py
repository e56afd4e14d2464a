"""The parity rules, in one place: whether an exported format is fit (`judge`, at export, against the dynamic
graph and the gold labels) and whether a format opened later still gives what export recorded (`load_problem`, at
every load and reload). A floating-point format must match within its tolerance and agree on every label
(`fp_match`, both times); an INT8 one may cost at most its accuracy drop at export, and at load must agree on
`RELOAD_AGREEMENT` of the labels it can tell apart."""

from __future__ import annotations

from senti.serving.backends import FORMATS

RELOAD_AGREEMENT = 0.9
# The most parity texts an export.json may ask a load to score: senti export records 16 (export.parity.SINGLE_TEXTS);
# a planted 200,000 held a Node server's start for over a minute.
MAX_PARITY_TEXTS = 1024
# A Hugging Face encoder converted to Paddle ERNIE (toolkit.training.convert) against a numpy forward pass of the
# original tensors: the largest difference allowed in the last hidden states (a right conversion reads about 1e-6, a
# wrong transpose or position offset about 1).
CONVERSION_TOLERANCE = 1e-3


def conversion_fits(max_abs_diff: float) -> bool:
    """The rule for a converted encoder: last hidden states within CONVERSION_TOLERANCE of the original's."""
    return max_abs_diff <= CONVERSION_TOLERANCE


def judge(fmt: str, result: dict, reference_accuracy: float) -> dict:
    """Add `fit` and `reason` by the format's tolerance in `FORMATS`: fp32 must match, fp16 nearly,
    INT8 may cost at most its accuracy drop."""
    kind, limit = FORMATS[fmt].tolerance
    if kind == "accuracy_drop":
        drop = reference_accuracy - result["accuracy"]
        result["accuracy_drop"] = drop
        ok = drop <= limit
        reason = f"accuracy drop {drop:+.4f} {'within' if ok else 'beyond'} {limit}"
    else:
        ok = fp_match(result["max_abs_logit_diff"], result["label_agreement"], limit)
        reason = (f"max |logit diff| {result['max_abs_logit_diff']:.2e} (limit {limit:.0e}), "
                  f"label agreement {result['label_agreement']:.4f} (must be 1)")
    return {**result, "fit": bool(ok), "reason": reason}


def fp_match(max_abs_diff: float, label_agreement: float, limit: float) -> bool:
    """The rule for a floating-point format (tolerance "atol"), at export and at every load: logits within `limit`
    of the reference and every label the same."""
    return max_abs_diff <= limit and label_agreement == 1.0


def load_problem(got, expected, tolerance: tuple[str, float], recorded_diff: float) -> str | None:
    """Why `got` (the opened model's logits for the parity texts) is not the export's `expected`, or None.

    An fp32 format must match within its tolerance and agree on every label. A quantized one ("accuracy_drop")
    must agree on 90% of the labels that it can tell apart: a text whose two best recorded logits are within twice
    the logit difference the export measured for this format may fall either way (a model with random weights gives
    near-ties everywhere, and its INT8 file flipped 14 of 16 such labels while its accuracy matched), so it is not
    counted; a tampered vocabulary moves clear answers too."""
    import numpy as np

    kind, limit = tolerance
    worst = float(np.abs(got - expected).max())
    if kind == "atol":
        agree = float((got.argmax(1) == expected.argmax(1)).mean())
        return None if fp_match(worst, agree, limit) else f"max |logit diff| {worst:.2e}, label agreement {agree:.2f}"
    top2 = np.sort(expected, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * recorded_diff
    if not clear.any():
        return None
    agree = float((got.argmax(1) == expected.argmax(1))[clear].mean())
    return None if agree >= RELOAD_AGREEMENT else (f"max |logit diff| {worst:.2e}, label agreement {agree:.2f} on the "
                                      f"{int(clear.sum())} texts it can tell apart")
