"""The probes answered on this machine before Ray is started (`pipeline.fleet.local_probe`)."""

from __future__ import annotations

import pytest

from pipeline.fleet import local_probe
from workers.backends import build
from workers.measure import device


def test_the_cpu_and_the_toolchains_are_what_a_slot_would_report():
    devices, toolchains = local_probe.probe(["cpu"], with_toolchains=True)
    assert devices["cpu"]["name"] == device.cpu_info().name and devices["cpu"]["kind"] == "cpu"
    assert {k: v.get("ident") for k, v in toolchains.items()} == {k: v.get("ident") for k, v in build.toolchains().items()}


def test_without_toolchains_only_the_devices_are_asked():
    devices, toolchains = local_probe.probe(["cpu"], with_toolchains=False)
    assert toolchains == {} and set(devices) == {"cpu"}


@pytest.mark.skipif(device.gpu_kind() == "cuda", reason="this machine has a CUDA GPU")
def test_a_gpu_probe_that_fails_names_the_kind_and_says_why():
    with pytest.raises(RuntimeError, match=r"device probe of cuda on this machine failed \(exit [1-9]") as caught:
        local_probe.probe(["cuda"], with_toolchains=False)
    assert "Error" in str(caught.value)  # the child's traceback tail is in the message


def test_a_local_probe_that_fails_falls_back_to_the_clusters_slots(monkeypatch, tmp_path):
    """Where this machine cannot answer (a GPU probe child failing), the session starts its
    cluster and asks the slots, as a command that does not defer Ray does."""
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import Session

    class Connected(Exception):
        pass

    def failing(kinds, with_toolchains, notes=None):
        raise RuntimeError("device probe of cuda on this machine failed (exit 1)")

    def connect():
        raise Connected

    monkeypatch.setattr(local_probe, "probe", failing)
    session = Session(None, tmp_path, None, Progress(enabled=False), connect=connect,
                      local_resources={"flopwatch_cpu": 1})
    with pytest.raises(Connected):
        session.probe({"cpu"})
