"""mixprec: mixed-precision training of neural networks with the Keras API, on a C++ core.

    import mixprec as mp
    mp.mixed_precision.set_global_policy("mixed_float16")
    inputs = mp.Input(shape=(784,), name="digits")
    x = mp.layers.Dense(4096, activation="relu")(inputs)
    outputs = mp.layers.Activation("softmax", dtype="float32")(mp.layers.Dense(10)(x))
    model = mp.Model(inputs=inputs, outputs=outputs)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=mp.optimizers.RMSprop(),
                  metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=8192, epochs=5, validation_split=0.2)

Submodules use Keras's names: layers, optimizers, losses, metrics, callbacks, mixed_precision,
applications, datasets, data, distributed, ops. NumPy arrays go in without copies where their
dtype and layout allow; Tensor.numpy() and DLPack (Tensor.__dlpack__, mixprec.from_dlpack) bring
values out. fit, evaluate and predict release the GIL.
"""

from . import _mixprec
from ._mixprec import (
    DType,
    Error,
    GradientTape,
    History,
    Input,
    KerasTensor,
    Model,
    PhysicalDevice,
    Sequential,
    Tensor,
    as_dtype,
    clear_session,
    constant,
    convert_to_tensor,
    from_dlpack,
    info,
    list_physical_devices,
    load_model,
    model_from_json,
    ones,
    set_seed,
    tensor,
    zeros,
)
from . import ops
from . import (
    applications,
    callbacks,
    config,
    data,
    datasets,
    distributed,
    errors,
    layers,
    losses,
    metrics,
    mixed_precision,
    optimizers,
    utils,
)

__version__ = _mixprec.__version__

float32 = DType.float32
float16 = DType.float16
bfloat16 = DType.bfloat16
float64 = DType.float64
int32 = DType.int32
int64 = DType.int64
uint8 = DType.uint8
bool_ = DType.bool

__all__ = [
    "DType", "Error", "GradientTape", "History", "Input", "KerasTensor", "Model",
    "PhysicalDevice", "Sequential", "Tensor", "applications", "as_dtype", "bfloat16", "bool_",
    "callbacks", "clear_session", "config", "constant", "convert_to_tensor", "data", "datasets",
    "distributed", "errors", "float16", "float32", "float64", "from_dlpack", "info", "int32",
    "int64", "layers", "list_physical_devices", "load_model", "losses", "metrics",
    "mixed_precision", "model_from_json", "ones", "ops", "optimizers", "set_seed", "tensor",
    "uint8", "utils", "zeros",
]
