"""Differentiable operations on tensors (keras.ops names). Arguments may be Tensors, NumPy arrays
or Python numbers; results are Tensors."""

from ._mixprec.ops import (
    abs,
    add,
    all_finite,
    argmax,
    cast,
    concatenate,
    divide,
    exp,
    gelu,
    log,
    matmul,
    max,
    maximum,
    mean,
    minimum,
    multiply,
    negative,
    one_hot,
    relu,
    relu6,
    reshape,
    sigmoid,
    silu,
    softmax,
    sqrt,
    subtract,
    sum,
    tanh,
)

__all__ = ["abs", "add", "all_finite", "argmax", "cast", "concatenate", "divide", "exp", "gelu",
           "log", "matmul", "max", "maximum", "mean", "minimum", "multiply", "negative", "one_hot",
           "relu", "relu6", "reshape", "sigmoid", "silu", "softmax", "sqrt", "subtract", "sum",
           "tanh"]
