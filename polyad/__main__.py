"""``python -m polyad info``: the version, the backends usable here with their devices and versions, and
why any backend is unavailable."""

import argparse
import sys

import polyad
import polyad.dispatch as dispatch


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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m polyad", description="polyad command line")
    parser.add_argument("command", choices=["info"], help="info: version, backends, devices")
    args = parser.parse_args(argv)
    if args.command == "info":
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
