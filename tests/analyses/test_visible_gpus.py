"""What a workload log says about the GPUs it sees (dradiag.analyses.visible_gpus)."""

from __future__ import annotations

from dradiag.analyses.visible_gpus import visible_gpus

SMI_TWO = (
    "GPU 0: NVIDIA RTX A6000 (UUID: GPU-60191ee1-f437-565c-ab0f-914032019dc5)\n"
    "GPU 1: NVIDIA RTX A6000 (UUID: GPU-c2f4e0a8-1d3b-4e6f-9a7c-5b8d0e2f4a61)\n"
)


def test_nvidia_smi_list_counts_distinct_gpus():
    seen = visible_gpus(SMI_TWO + SMI_TWO)  # the same listing printed twice (a restart)
    assert seen is not None and seen.count == 2
    assert seen.line.startswith("GPU 0: NVIDIA RTX A6000")


def test_cuda_visible_devices_and_device_count():
    assert visible_gpus("CUDA_VISIBLE_DEVICES=0,1,2,3\n").count == 4
    assert visible_gpus("torch.cuda.device_count() = 8\n").count == 8
    assert visible_gpus("Found 3 GPUs\n").count == 3


def test_hidden_or_absent_gpus_say_nothing():
    assert visible_gpus("CUDA_VISIBLE_DEVICES=-1\n") is None
    assert visible_gpus("training step 10 loss 0.3\n") is None


def test_mig_listing_counts_mig_devices_only_when_no_full_gpu_signal():
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c)\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-1b2c3d4e-5f60-5718-92a3-b4c5d6e7f809)\n"
    )
    seen = visible_gpus(text)
    assert seen is not None and seen.count == 1 and not seen.mig
