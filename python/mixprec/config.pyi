from typing import Literal

from . import PhysicalDevice as PhysicalDevice

def list_physical_devices(device_type: Literal["CPU", "GPU"] | None = None) -> list[PhysicalDevice]: ...
