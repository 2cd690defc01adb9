"""The frameworks livecells knows (PyTorch, MXNet, TensorFlow, JAX) and one it does not: their
settings, the device a timing line names, the environment a kernel gets. No kernel here; the
real TensorFlow and JAX kernels are tests/kernel/test_frameworks_envs.py's."""

from __future__ import annotations

import os
from typing import Any

import pytest

from livecells.config import read_config
from livecells.execute.devices import GPU, Lease, cpu_name
from livecells.execute.kernels.session import KernelSession
from livecells.execute.scheduler import SessionJob, session_record
from livecells.model.frameworks import (
    DEFAULT_FRAMEWORKS,
    JAX_SYNC,
    KNOWN_FRAMEWORKS,
    TENSORFLOW_SYNC,
    FrameworkSpec,
)
from livecells.model.plans import CellPlan, PageSettings, SessionPlan
from livecells.model.records import CellRecord, Probe

from helpers import no_report, said

H100 = GPU(0, "NVIDIA H100", "GPU-1")


def test_tensorflow_and_jax_are_known_but_not_default_tabs() -> None:
    assert list(DEFAULT_FRAMEWORKS) == ["pytorch", "mxnet"]
    assert set(KNOWN_FRAMEWORKS) == {"pytorch", "mxnet", "tensorflow", "jax"}
    assert list(read_config({}, no_report).frameworks) == ["pytorch", "mxnet"]
    config = read_config({"frameworks": {"jax": {}, "tensorflow": {"kernel": "d2l-tensorflow"}}}, no_report)
    jax, tf = config.frameworks["jax"], config.frameworks["tensorflow"]
    assert (jax.label, jax.preload, jax.sync, jax.version_module) == ("JAX", ("jax",), JAX_SYNC, "jax")
    assert (tf.label, tf.kernel, tf.sync, tf.version_module) == ("TensorFlow", "d2l-tensorflow", TENSORFLOW_SYNC, "tensorflow")
    assert dict(tf.env) == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert dict(jax.env) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert "jax" in jax.gpu_used and "tensorflow" in tf.gpu_used


def test_an_unknown_framework_cannot_tell_its_device_and_env_is_checked() -> None:
    warnings: list[str] = []
    config = read_config({"frameworks": {"paddle": {"env": {"X": "1"}}}}, said(warnings))
    paddle = config.frameworks["paddle"]
    assert (paddle.sync, paddle.gpu_used, dict(paddle.env)) == ("", "", {"X": "1"}) and not warnings
    for bad in ({"X": 1}, ["X=1"], {"": "1"}, {"A=B": "1"}):
        warnings.clear()
        config = read_config({"frameworks": {"paddle": {"env": bad}}}, said(warnings))
        assert list(config.frameworks) == list(DEFAULT_FRAMEWORKS)
        assert any("'env' must map variable names to strings" in w for w in warnings), bad


def _record(framework: FrameworkSpec, gpus: tuple[GPU, ...], probe: dict[str, Any]) -> Any:
    cell = CellPlan(index=0, frameworks=(framework.name,), code="pass", line=1, code_line=2)
    plan = SessionPlan("page", framework.name, "/page.rst", (cell,), PageSettings())
    job = SessionJob(plan, framework, "key", "env", len(gpus), 30.0, 10_000)
    result = CellRecord(status="ok", time=0.1, execution_count=1)
    return session_record(job, Lease(gpus), {0: result}, Probe.from_json(probe), None, 1.0).provenance


def test_the_timing_line_names_the_cpu_only_where_the_framework_says_so() -> None:
    known = FrameworkSpec(name="jax", label="JAX", gpu_used="False")
    unknown = FrameworkSpec(name="paddle", label="Paddle")
    assert _record(known, (H100,), {"gpu_used": True}).device == "NVIDIA H100"
    assert _record(known, (H100,), {"gpu_used": False}).device == cpu_name()
    # A framework that cannot tell (no gpu_used), given a GPU: no device, never the CPU.
    found = _record(unknown, (H100,), {"gpu_used": None})
    assert (found.device, found.device_kind, found.device_count) == ("", "", 0)
    # Without a GPU there is nothing else it could have used.
    assert _record(unknown, (), {"gpu_used": None}).device == cpu_name()


def test_a_frameworks_env_reaches_its_kernel_unless_the_build_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    tf = read_config({"frameworks": {"tensorflow": {}}}, no_report).frameworks["tensorflow"]
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    env = KernelSession(tf, cwd=os.getcwd(), devices=[0])._environment()
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and env["CUDA_VISIBLE_DEVICES"] == "0"
    monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false")  # the build's own choice stands
    assert KernelSession(tf, cwd=os.getcwd(), devices=[])._environment()["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"


@pytest.mark.parametrize("name", ["tensorflow", "jax"])
def test_sync_and_gpu_used_do_nothing_where_the_framework_is_not_imported(name: str) -> None:
    import sys

    spec = read_config({"frameworks": {name: {}}}, no_report).frameworks[name]
    assert name not in sys.modules
    exec(compile(spec.sync, "<sync>", "exec"), {"sys": sys})
    assert eval(compile(spec.gpu_used, "<gpu>", "eval"), {"sys": sys}) is False


def test_a_bad_entry_drops_that_framework_only_and_says_which() -> None:
    warnings: list[str] = []
    config = read_config(
        {"frameworks": {"pytorch": {}, "paddle": {"kernal": "p"}, "jax": {"preload": ["a b"]}, "mxnet": {}}},
        said(warnings),
    )
    assert list(config.frameworks) == ["pytorch", "mxnet"]
    assert len(warnings) == 2 and all("that entry is ignored" in w for w in warnings), warnings
    assert "framework 'paddle' has unknown keys ['kernal']" in warnings[0]
    assert "framework 'jax': 'preload' holds 'a b'" in warnings[1]
    # With no entry left, the default.
    warnings.clear()
    assert list(read_config({"frameworks": {"x": 1}}, said(warnings)).frameworks) == list(DEFAULT_FRAMEWORKS)
    assert len(warnings) == 1 and "using the default" in warnings[0]


@pytest.mark.parametrize("name", ["pytorch", "tensorflow", "paddle"])
def test_a_spec_gives_back_the_settings_it_was_made_from(name: str) -> None:
    spec = FrameworkSpec.from_settings(name, {"kernel": "k", "env": {"A": "1"}})
    assert FrameworkSpec.from_settings(name, spec.settings()) == spec
