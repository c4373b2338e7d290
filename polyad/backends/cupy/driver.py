"""Which CuPy wheel fits this machine's NVIDIA driver, read without CuPy (so it also answers when the wrong
CuPy wheel is installed, or none): ``python -m polyad info`` prints it.

CuPy ships one wheel per CUDA major version (``cupy-cuda12x``, ``cupy-cuda13x``), and a driver runs
the CUDA versions up to its own: a CUDA 13 driver (580 and later) runs either wheel, a CUDA 12 driver
(525 to 575) only ``cupy-cuda12x``. polyad's extras are named after them (``polyad[cuda12]``,
``polyad[cuda13]``).
"""

import ctypes
import ctypes.util
import importlib.metadata
import re
import subprocess
import sys

# CUDA major version -> (CuPy's wheel, polyad's extra)
WHEELS = {12: ("cupy-cuda12x", "cuda12"), 13: ("cupy-cuda13x", "cuda13")}


def driver_cuda_version():
    """``(major, minor)`` of the newest CUDA version the installed NVIDIA driver runs, or None where there
    is no driver. Read from the driver library (``cuDriverGetVersion``), else from ``nvidia-smi``."""
    version = _from_libcuda()
    return version if version is not None else _from_nvidia_smi()


def _from_libcuda():
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", ctypes.util.find_library("cuda")]
    for name in filter(None, names):
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        value = ctypes.c_int(0)
        if library.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value > 0:
            return divmod(value.value, 1000)[0], value.value % 1000 // 10  # 13000 -> (13, 0)
    return None


def _from_nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(out)


def parse_nvidia_smi(text):
    """``(major, minor)`` from the "CUDA Version: 13.0" of ``nvidia-smi``'s header, or None.

    Example:
        >>> parse_nvidia_smi("| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |")
        (13, 0)
    """
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", text or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def wheel_for(version):
    """What to install for a driver whose CUDA version is ``version`` (``(major, minor)`` or None), in a
    sentence.

    Args:
        version: the driver's CUDA version, as ``driver_cuda_version`` returns it.

    Returns:
        A line naming the CuPy wheel and polyad's extra that match, or saying why none does.

    Example:
        >>> wheel_for((13, 0))
        'driver runs CUDA 13.0: CuPy wheel cupy-cuda13x, pip install "polyad[cuda13]" (cuda12 runs too)'
        >>> wheel_for((12, 4))
        'driver runs CUDA 12.4: CuPy wheel cupy-cuda12x, pip install "polyad[cuda12]"'
    """
    if version is None:
        return "no NVIDIA driver found (no libcuda, no nvidia-smi): CuPy needs one; polyad runs on the CPU"
    major, minor = version
    newest = max(WHEELS)
    if major < min(WHEELS):
        return (
            f"driver runs CUDA {major}.{minor}: CuPy has no wheel for it; a driver of CUDA 12 or later "
            f"(525 and later) runs polyad[cuda12]"
        )
    wheel, extra = WHEELS[min(major, newest)]
    line = f'driver runs CUDA {major}.{minor}: CuPy wheel {wheel}, pip install "polyad[{extra}]"'
    older = [e for m, (_, e) in sorted(WHEELS.items()) if m < min(major, newest)]
    if older:
        line += f" ({', '.join(older)} runs too)"
    if major > newest:
        line += f"; a newer CuPy may have a wheel for CUDA {major}"
    return line


def installed_wheels():
    """The names of the CuPy wheels installed here (``cupy-cuda12x``, ...), sorted."""
    names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()}
    return sorted(n for n in names if n and re.fullmatch(r"cupy(-cuda\w+|-rocm\S*)?", n.lower()))


def advice(version, installed):
    """The ``info`` lines: the driver's match (``wheel_for``) and whether ``installed`` (wheel names) has it.

    Example:
        >>> advice((13, 0), ["cupy-cuda12x"])[1]
        'installed: cupy-cuda12x (runs on this driver; cupy-cuda13x matches it)'
    """
    lines = [wheel_for(version)]
    if version is None or version[0] < min(WHEELS):
        return lines + [f"installed: {', '.join(installed) or 'no CuPy'}"]
    match = WHEELS[min(version[0], max(WHEELS))][0]
    if not installed:
        return lines + ["installed: no CuPy"]
    notes = []
    for name in installed:
        cuda = re.fullmatch(r"cupy-cuda(\d+)x", name)
        if name == match:
            notes.append(f"{name} (matches)")
        elif cuda and int(cuda.group(1)) <= version[0]:
            notes.append(f"{name} (runs on this driver; {match} matches it)")
        elif cuda:
            notes.append(f"{name} (needs a newer driver than this one: install {match})")
        else:
            notes.append(name)
    return lines + [f"installed: {', '.join(notes)}"]
