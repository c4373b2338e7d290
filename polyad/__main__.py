"""``python -m polyad info``: the version, the backends usable here with their devices and versions, why
any backend is unavailable, and which CuPy wheel (polyad extra) fits the NVIDIA driver here."""

import argparse
import sys

import polyad
import polyad.core.dispatch as dispatch
from polyad.backends.cupy import driver


def info():
    print(f"polyad {polyad.__version__} (Array API {polyad.xp.__array_api_version__})")
    print(f"default backend: {polyad.get_backend()} (POLYAD_BACKEND selects it)")
    print(f"device priority: {' > '.join(dispatch.DEVICE_PRIORITY)}")
    print("backends:")
    for name in dispatch.usable_backends():
        b = dispatch.load_backend(name)
        devices = ", ".join(str(d) for d in b.devices())
        print(f"  {name:17s} available    version {b.version}; devices: {devices}")
    for name, reason in dispatch.unavailable_backends().items():
        print(f"  {name:17s} unavailable  {reason}")
    print("CUDA:")
    for line in driver.advice(driver.driver_cuda_version(), driver.installed_wheels()):
        print(f"  {line}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m polyad", description="polyad command line")
    parser.add_argument(
        "command", choices=["info"], help="info: version, backends, devices, the CuPy wheel for this driver"
    )
    args = parser.parse_args(argv)
    if args.command == "info":
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
