"""The machine description and the precision choice (helpers.core.hardware)."""
from __future__ import annotations

import pytest
import torch

from helpers.core import hardware


def test_cpu_info_names_the_cpu_and_its_flags():
    info = hardware.cpu_info()
    assert isinstance(info["model"], str) and info["model"]
    assert set(info["flags"]) <= set(hardware._FLAGS)
    assert info["cores"] >= 1
    assert info["label"].startswith(info["model"])
    if info["family"] and info["model_id"]:  # Linux x86: generations that share a marketing name are told apart
        assert f"family {info['family']}, model {info['model_id']}" in info["label"]


def test_cpu_label_reads_family_and_model(monkeypatch, tmp_path):
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
            "stepping\t: 1\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\n")
    real_open = open
    fake = tmp_path / "cpuinfo"
    fake.write_text(text)
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(fake if path == "/proc/cpuinfo" else path, *a, **k))
    hardware.cpu_info.cache_clear()  # cached: an earlier call read the real machine (on this CPU the test would pass anyway)
    try:
        info = hardware.cpu_info()
    finally:
        hardware.cpu_info.cache_clear()
    assert (info["model"], info["family"], info["model_id"], info["stepping"]) == ("AMD EPYC", "26", "2", "1")
    assert info["label"] == "AMD EPYC (family 26, model 2)"
    assert info["flags"][:3] == ["avx2", "avx512f", "avx512_bf16"]


def test_auto_precision_follows_native_bf16(monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": False)
    assert hardware.resolve_precision("auto") == "fp32"
    monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": True)
    assert hardware.resolve_precision("auto") == "bf16"
    assert hardware.resolve_precision("fp32") == "fp32" and hardware.resolve_precision("bf16") == "bf16"
    with pytest.raises(ValueError, match="precision"):
        hardware.resolve_precision("fp16")


def test_native_bf16_needs_the_cpu_flag(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_info", lambda: {"model": "x", "flags": ["avx2"], "cores": 2})
    assert hardware.native_bf16("cpu") is False


def test_autocast_context():
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with hardware.autocast_context("fp32")():
        assert lin(x).dtype == torch.float32
    with hardware.autocast_context("bf16")():
        assert lin(x).dtype == torch.bfloat16
    with pytest.raises(ValueError):
        hardware.autocast_context("auto")


def test_compute_device_prefers_the_gpu_only_when_there_is_one(monkeypatch):
    import torch

    from helpers.core.hardware import compute_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert compute_device("auto") == torch.device("cpu") and compute_device("auto", 3) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert compute_device("auto") == torch.device("cuda", 0) and compute_device("auto", 2) == torch.device("cuda", 2)
    assert compute_device("cpu") == torch.device("cpu") and compute_device("cuda:1") == torch.device("cuda", 1)
    assert compute_device(torch.device("cpu")) == torch.device("cpu")
    # torchrun with more processes than GPUs (seen on a one-GPU machine: CUDA's "invalid device ordinal" in rank 1)
    with pytest.raises(RuntimeError, match=r"this machine has 3: start at most 3 processes per node"):
        compute_device("auto", 3)


def test_gpu_names_lists_what_cuda_sees(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware.gpu_names() == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"GPU {i}")
    assert hardware.gpu_names() == ["GPU 0", "GPU 1"]
