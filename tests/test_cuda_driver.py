"""``python -m polyad info``'s CUDA lines: the CuPy wheel (polyad extra) that fits a driver, for driver
versions given here (this machine has no GPU), and the command's output."""

import os
import sys

import pytest

from polyad.__main__ import main
from polyad.backends.cupy import driver


@pytest.mark.parametrize(
    ("version", "wheel", "extra"),
    [((13, 0), "cupy-cuda13x", "cuda13"), ((13, 2), "cupy-cuda13x", "cuda13"),
     ((12, 9), "cupy-cuda12x", "cuda12"), ((12, 0), "cupy-cuda12x", "cuda12"),
     ((14, 1), "cupy-cuda13x", "cuda13")],
)  # fmt: skip
def test_the_wheel_matches_the_drivers_cuda_major_version(version, wheel, extra):
    line = driver.wheel_for(version)
    assert f"CUDA {version[0]}.{version[1]}" in line
    assert f"CuPy wheel {wheel}," in line and f'"polyad[{extra}]"' in line
    assert ("cuda12 runs too" in line) == (version[0] >= 13)  # a driver runs older CUDA majors
    assert ("a newer CuPy may have a wheel for CUDA 14" in line) == (version[0] == 14)


def test_no_driver_and_too_old_a_driver_say_so():
    assert driver.wheel_for(None).startswith("no NVIDIA driver found")
    line = driver.wheel_for((11, 8))
    assert "CuPy has no wheel for it" in line and "polyad[cuda12]" in line


def test_the_installed_wheel_is_checked_against_the_driver():
    assert driver.advice((13, 0), ["cupy-cuda13x"])[1] == "installed: cupy-cuda13x (matches)"
    assert driver.advice((12, 4), ["cupy-cuda13x"])[1] == (
        "installed: cupy-cuda13x (needs a newer driver than this one: install cupy-cuda12x)"
    )
    assert driver.advice((13, 0), ["cupy-cuda12x"])[1] == (
        "installed: cupy-cuda12x (runs on this driver; cupy-cuda13x matches it)"
    )
    assert driver.advice((13, 0), [])[1] == "installed: no CuPy"
    assert driver.advice(None, ["cupy-cuda13x"]) == [driver.wheel_for(None), "installed: cupy-cuda13x"]


def test_nvidia_smi_header_is_parsed():
    header = (
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |\n"
    )
    assert driver.parse_nvidia_smi(header) == (13, 0)
    assert driver.parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate") is None
    assert driver.parse_nvidia_smi(None) is None


def test_info_prints_the_cuda_lines_for_this_machine(capsys):
    assert main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("CUDA:")
    expected = driver.advice(driver.driver_cuda_version(), driver.installed_wheels())
    assert [line.strip() for line in lines[at + 1 : at + 1 + len(expected)]] == expected


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script as nvidia-smi")
def test_info_reads_a_faked_drivers_version_from_nvidia_smi(capsys, monkeypatch, tmp_path):
    # the seam: no driver library here, so info asks nvidia-smi on PATH; a fake one reports CUDA 12.4
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo '| NVIDIA-SMI 550.54.15      Driver Version: 550.54.15      CUDA Version: 12.4     |'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(driver, "_from_libcuda", lambda: None)
    monkeypatch.setattr(driver, "installed_wheels", lambda: ["cupy-cuda13x"])
    assert driver.driver_cuda_version() == (12, 4)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CUDA 12.4" in out and "cupy-cuda12x" in out and '"polyad[cuda12]"' in out
    assert "installed: cupy-cuda13x (needs a newer driver than this one: install cupy-cuda12x)" in out
