"""Devices (tf.config): list_physical_devices('GPU') is empty on a machine without a CUDA GPU or
in a build without the CUDA backend."""

from ._mixprec import PhysicalDevice, list_physical_devices

__all__ = ["PhysicalDevice", "list_physical_devices"]
