"""A plain numpy forward pass of a Hugging Face BERT-family encoder, read straight from its own tensor names.

The yardstick a conversion is checked against: it shares no code with the converter's name map or with Paddle, so
a wrong transpose, a wrong position offset or a wrong layer-norm epsilon shows as a difference in the hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BertShape:
    """What the forward pass needs of a Hugging Face config."""

    layers: int
    heads: int
    eps: float
    act: str  # gelu (erf), gelu_new / gelu_pytorch_tanh (tanh), relu
    position_offset: int  # RoBERTa's positions start after its padding id


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _act(x, name: str):
    if name == "gelu":
        from scipy.special import erf

        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0)
    raise ValueError(f"no reference for activation {name}")


def _get(w: dict, name: str) -> np.ndarray:
    """A tensor by its Hugging Face name, float64 (older files name layer norms gamma/beta)."""
    if name not in w:
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    return np.asarray(w[name], dtype=np.float64)


def bert_forward(w: dict, shape: BertShape, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Last hidden states [batch, tokens, hidden] of token ids [batch, tokens] (token type 0; `mask` 1 for real
    tokens), from a state dict with the encoder's names unprefixed (`embeddings.word_embeddings.weight`, ...)."""
    batch, tokens = ids.shape
    positions = np.arange(tokens) + shape.position_offset
    x = _get(w, "embeddings.word_embeddings.weight")[ids] + _get(w, "embeddings.position_embeddings.weight")[positions]
    if "embeddings.token_type_embeddings.weight" in w:
        x = x + _get(w, "embeddings.token_type_embeddings.weight")[0]
    x = _layer_norm(x, _get(w, "embeddings.LayerNorm.weight"), _get(w, "embeddings.LayerNorm.bias"), shape.eps)
    bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9)
    for i in range(shape.layers):
        p = f"encoder.layer.{i}."

        def linear(h, name, p=p):
            return h @ _get(w, p + name + ".weight").T + _get(w, p + name + ".bias")

        def split(h):
            return h.reshape(batch, tokens, shape.heads, -1).transpose(0, 2, 1, 3)

        q, k, v = (split(linear(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v
        attended = linear(context.transpose(0, 2, 1, 3).reshape(batch, tokens, -1), "attention.output.dense")
        x = _layer_norm(x + attended, _get(w, p + "attention.output.LayerNorm.weight"),
                        _get(w, p + "attention.output.LayerNorm.bias"), shape.eps)
        inner = _act(linear(x, "intermediate.dense"), shape.act)
        x = _layer_norm(x + linear(inner, "output.dense"), _get(w, p + "output.LayerNorm.weight"),
                        _get(w, p + "output.LayerNorm.bias"), shape.eps)
    return x
