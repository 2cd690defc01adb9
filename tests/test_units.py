"""Fast unit tests of the parts that need no Sphinx build and no kernel."""

from __future__ import annotations

from livecells.config import read_config
from livecells.execute.kernels.iopub import MAX_OUTPUTS, OutputCollector
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, TORCH_SYNC
from livecells.model.records import CellRecord
from livecells.model.streams import process_stream
from livecells.model.text import strip_ansi
from livecells.render.ansi import ansi_to_html

from helpers import said


def test_known_frameworks_keep_their_defaults_when_partly_configured():
    config = read_config(
        {"frameworks": {"pytorch": {"label": "Torch", "kernel": "torch-cuda"}, "paddle": {"label": "Paddle"}}},
        said([]),
    )
    torch = config.frameworks["pytorch"]
    assert (torch.label, torch.kernel, torch.sync, torch.preload) == ("Torch", "torch-cuda", TORCH_SYNC, ("torch",))
    assert config.frameworks["paddle"].sync == "" and config.frameworks["paddle"].kernel == "python3"
    assert list(config.frameworks) == ["pytorch", "paddle"]


def test_bad_config_values_warn_and_fall_back():
    warnings: list[str] = []
    config = read_config(
        {"execute": "sometimes", "timeout": -1, "frameworks": {"all": {}}, "latex_framework": "jax"},
        said(warnings),
    )
    assert config.execute == "auto" and config.timeout == 600
    assert list(config.frameworks) == list(DEFAULT_FRAMEWORKS)
    assert any("livecells_execute = 'sometimes'" in w for w in warnings)
    assert any("livecells_timeout = -1" in w for w in warnings)
    assert any("livecells_frameworks" in w for w in warnings)
    assert any("livecells_latex_framework = 'jax'" in w for w in warnings)


def test_ansi_is_stripped_or_turned_into_escaped_spans():
    text = "\x1b[31mred <b>\x1b[0m plain \x1b[2K"
    assert strip_ansi(text) == "red <b> plain "
    assert ansi_to_html(text) == '<span class="ansi-red-fg">red &lt;b&gt;</span> plain '


def test_streams_apply_carriage_returns_like_a_terminal():
    assert process_stream("progress 10%\rprogress 100%\ndone") == "progress 100%\ndone"


def test_collector_merges_streams_and_caps_floods():
    collector = OutputCollector(limit=10)
    collector.handle("stream", {"name": "stdout", "text": "12345"})
    collector.handle("stream", {"name": "stdout", "text": "67890abc"})
    collector.handle("stream", {"name": "stderr", "text": "err"})
    assert collector.outputs[0] == {"output_type": "stream", "name": "stdout", "text": "1234567890", "truncated": True}
    assert collector.outputs[1]["text"] == "err"
    for i in range(MAX_OUTPUTS + 5):
        collector.handle("display_data", {"data": {"text/plain": str(i)}, "metadata": {}})
    assert len(collector.outputs) == 2 + MAX_OUTPUTS + 1  # streams do not count: their limit is in characters
    assert "5 more output(s) left out" in collector.outputs[-1]["text"]


def test_collector_handles_clear_output_and_display_updates():
    collector = OutputCollector(limit=100)
    collector.handle("display_data", {"data": {"text/plain": "a"}, "metadata": {}, "transient": {"display_id": "d"}})
    collector.handle("update_display_data", {"data": {"text/plain": "b"}, "metadata": {}, "transient": {"display_id": "d"}})
    assert collector.outputs[0]["data"] == {"text/plain": "b"}
    collector.handle("clear_output", {"wait": True})
    collector.handle("stream", {"name": "stdout", "text": "after"})
    assert [o.get("text") for o in collector.outputs] == ["after"]


def test_collector_refuses_huge_images():
    collector = OutputCollector(limit=100)
    collector.handle("display_data", {"data": {"image/png": "A" * 20_000_000}, "metadata": {}})
    output = collector.outputs[0]
    assert "image/png" not in output["data"] and "left out" in output["livecells_refused"]


def test_error_line_reads_the_cell_frame():
    tb = ["\x1b[31mValueError\x1b[39m", "\x1b[36mCell\x1b[39m In[4], line 3\n----> 3 raise ValueError", "x"]
    error = {"traceback": tb, "ename": "ValueError"}
    assert CellRecord("error", execution_count=4, error=error).error_line() == 3
    assert CellRecord("error", execution_count=5, error=error).error_line() is None


def test_the_default_env_drop_keeps_ci_secrets_from_kernels_and_settings_in_them():
    """The names CI systems and tools give their credentials, in any case, are dropped; the
    settings a notebook needs are kept."""
    from livecells.model.environ import DEFAULT_ENV_DROP, kept_environ

    secrets = [
        "GITHUB_TOKEN", "github_token", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "TWINE_PASSWORD",
        "HF_TOKEN", "WANDB_API_KEY", "OPENAI_APIKEY", "CI_JOB_JWT", "CI_JOB_JWT_V2", "DOCKER_AUTH_CONFIG",
        "NPM_CONFIG__AUTH", "SENTRY_DSN", "GOOGLE_APPLICATION_CREDENTIALS", "GH_PAT", "SSH_AUTH_SOCK",
    ]  # fmt: skip
    settings = ["PATH", "HOME", "CUDA_VISIBLE_DEVICES", "HF_HOME", "GIT_AUTHOR_NAME", "LANG", "OMP_NUM_THREADS"]
    kept = kept_environ(dict.fromkeys(secrets + settings, "x"), DEFAULT_ENV_DROP)
    assert sorted(kept) == sorted(settings)
