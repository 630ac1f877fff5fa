"""Layers (keras.layers), with Keras's keyword arguments and defaults.

Every layer takes dtype= (a policy name or a mixed_precision.Policy; None: the global policy at
construction), name= and trainable=. Calling a layer on the KerasTensor of mixprec.Input builds a
functional model's graph; calling it on an array or a Tensor computes (with the GIL released). A
layer called outside every `with mixprec.GradientTape()` block records no gradient graph.
"""

from ._mixprec import (
    Activation,
    Add,
    AveragePooling2D,
    BatchNormalization,
    ClassToken,
    Concatenate,
    Conv2D,
    Cropping1D,
    Dense,
    DepthwiseConv2D,
    Dropout,
    Embedding,
    Flatten,
    GlobalAveragePooling2D,
    Initializer,
    Input,
    InputLayer,
    Layer,
    LayerNormalization,
    MaxPooling2D,
    MultiHeadAttention,
    Multiply,
    PositionEmbedding,
    Reshape,
    Resizing,
    ReversibleEmbedding,
    RMSNormalization,
    Softmax,
    SyncBatchNormalization,
    ZeroPadding2D,
)

__all__ = [
    "Activation", "Add", "AveragePooling2D", "BatchNormalization", "ClassToken", "Concatenate",
    "Conv2D", "Cropping1D", "Dense", "DepthwiseConv2D", "Dropout", "Embedding", "Flatten",
    "GlobalAveragePooling2D", "Initializer", "Input", "InputLayer", "Layer", "LayerNormalization",
    "MaxPooling2D", "MultiHeadAttention", "Multiply", "PositionEmbedding", "Reshape", "Resizing",
    "ReversibleEmbedding", "RMSNormalization", "Softmax", "SyncBatchNormalization",
    "ZeroPadding2D",
]
