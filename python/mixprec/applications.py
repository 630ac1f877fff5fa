"""The model zoo (keras.applications, and mixprec's own): built from the public layers, untrained.
There are no pretrained weights: weights must be None."""

from ._mixprec import applications as _apps


def _image_args(weights, input_shape, default_size):
    if weights is not None:
        raise ValueError("mixprec ships no pretrained weights: use weights=None")
    if input_shape is None:
        return default_size, 3
    if len(input_shape) != 3 or input_shape[0] != input_shape[1]:
        raise ValueError(f"input_shape must be (size, size, channels), got {tuple(input_shape)}")
    return int(input_shape[0]), int(input_shape[2])


def _efficientnet(variant):
    def build(include_top=True, weights=None, input_shape=None, classes=1000, dtype=None,
              name=None):
        size, channels = _image_args(weights, input_shape, 0)
        return _apps.efficientnet(variant, input_size=size, channels=channels, classes=classes,
                                  include_top=include_top, dtype=dtype, name=name)

    build.__name__ = f"EfficientNetB{variant}"
    build.__doc__ = (f"EfficientNet-B{variant} (NHWC, input_shape default: the paper's "
                     "resolution, 3 channels), as keras.applications builds it.")
    return build


EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3 = (_efficientnet(v) for v in range(4))
EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7 = (_efficientnet(v) for v in range(4, 8))


def ResNet50(include_top=True, weights=None, input_shape=None, classes=1000, dtype=None,
             name=None):
    """ResNet-50 (NHWC, default input 224x224x3)."""
    size, channels = _image_args(weights, input_shape, 224)
    return _apps.resnet50(input_size=size, channels=channels, classes=classes,
                          include_top=include_top, dtype=dtype, name=name)


MLP = _apps.mlp
CNN = _apps.cnn
GPT = _apps.gpt
ViT = _apps.vit
gpt_preset_names = _apps.gpt_preset_names
generate = _apps.generate
load_gpt2_huggingface = _apps.load_gpt2_huggingface
save_gpt2_huggingface = _apps.save_gpt2_huggingface

__all__ = ["CNN", "GPT", "MLP", "ResNet50", "ViT", "generate", "gpt_preset_names",
           "load_gpt2_huggingface", "save_gpt2_huggingface"] + [
    f"EfficientNetB{v}" for v in range(8)]
