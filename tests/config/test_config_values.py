"""The config values (``livecells_*``, :mod:`livecells.config`): each wrong value refused with a
warning at its conf.py line (or naming ``-D``) and its default used; a bad entry of a value that
holds entries (frameworks, patterns) dropped alone; the defaults' own rules (issue 12, class 5).

Most builds here run nothing, or run on :class:`helpers.FakeKernels`; the one marked ``kernel``
also checks, in a real kernel, that a framework's sync code that fails is a warning at its cell.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from livecells.config import get_config, read_config
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, TORCH_SYNC

import timing
from helpers import FakeKernels, build_site, line_of, live_cell, procs_site, said


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


# One wrong value (of a wrong type, or meaningless) for every livecells_ value.
BAD_VALUES = {
    "frameworks": [None, [], {"alpha": None}, {"alpha": {"preload": 3}}, {"alpha": {"kernel": 7}},
                   {"alpha": {"sync": "x ="}}, {"alpha": {"gpu_used": "import os"}},
                   {"alpha": {"label": None}}, {"alpha": {"preload": ["not a module"]}},
                   {"alpha": {"version_of": "os; import sys"}}],
    "execute": ["sometimes", 1, None],
    "device": ["tpu", None],
    "timeout": [float("nan"), float("inf"), -1, 0, "600", True, None],
    "jobs": [0, -2, "many", 1.5, None],
    "store": ["", 3, None],
    "raise_on_error": ["yes", 1, None],
    "latex_framework": [3, None],
    "allow_html": ["no", 0],
    "executor": ["", 8786, None],
    "fork_kernels": ["no", None],
    "keep_warm": [-1, float("inf"), "later", True, None, "Auto"],
    "output_limit": [0, "big", 1.5, True],
    "depends": [3, [1], [""], None],
    "depends_granularity": ["functions", 1, None],
    "mime_priority": ["text/plain", 3, None, [("html", "bmp", 1)], [("html", "text/plain")],
                      [("*", "text/plain", "1")], [["", "text/plain", 1]]],
    "env_drop": [3, [1], [""], None, {"A": 1}],
    "launch": [3, None, "https://x.org/{path}", ["https://x.org/{path}"], {"colab": "javascript:x"},
               {"colab": {"pytorch": 3}}, {"colab": {}}, {"": "https://x.org/{path}"}, {"x": "https://x.org/{p}"}],
    "image_options": [3, None, "80%", {"width": "wide"}, {"scale": 50}, {"classes": "!!!"}],
    "hosted": [3, None, ["colab"], {"colab": "python3"}, {"colab": {"kernel": 3}}, {"a/b": {}},
               {"colab": {"libs": {"pytorch": {"d2l": "d2l\n!x"}}}}, {"colab": {"folder": "{page}"}}],
    "execute_exclude": [3, [1], [""], None],
    "allow_errors": ["yes", 1, None],
    "stderr": ["loud", None, 3],
    "show_tb": ["yes", 1, None],
    "summary_dir": [3, None],
    "show_host": ["yes", 0, None],
    "repeat": [0, -1, "3", 1.5, None, True],
    "warmup": [-1, "x", 1.5, None, True],
    "drift_factor": [1, 0.5, "2", None, float("nan"), float("inf")],
    "drift_floor": [-1, "x", None, float("nan")],
    "library": [3, "x", ["pytorch"], ("lib_file", "d2l/torch.py")],
    "slides": [3, "x", [], {"top_right": 3}, {"colour": ""}, {"github_repo": "pytorch, a/b"},
               {"github_repo": {"pytorch": "a b"}}, {"github_repo": {"jax": "a/b"}}],
}


def test_every_config_value_refuses_wrong_values_with_a_warning():
    from livecells.config import CONFIG_FIELDS, LivecellsConfig, read_config
    from livecells.model.slides import SlidesSettings

    assert set(BAD_VALUES) == set(CONFIG_FIELDS)  # a new value gets its bad examples too
    default = LivecellsConfig()
    for name, values in BAD_VALUES.items():
        for value in values:
            warnings: list[str] = []
            config = read_config({name: value}, said(warnings))
            assert len(warnings) == 1 and f"livecells_{name}" in warnings[0], (name, value)
            expected = getattr(default, name)
            if name == "slides" and isinstance(value, dict):
                expected = SlidesSettings()  # a dict turns the slides on; its bad entry is left out
            assert getattr(config, name) == expected, (name, value)


def test_none_and_stdlib_preloads_are_understood():
    from livecells.config import read_config

    warnings: list[str] = []
    config = read_config({"frameworks": {"alpha": {"preload": None}, "beta": {"preload": ["json"]}}}, said(warnings))
    assert warnings == []
    assert config.frameworks["alpha"].preload == () and config.frameworks["beta"].preload == ("json",)


CONF_WITH_BAD_VALUES = """
livecells_timeout = float("nan")
livecells_jobs = "many"
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3", "preload": None},
    "beta": {"label": "Beta", "kernel": "python3", "preload": ["json"], "sync": "raise RuntimeError('no device')"},
}
"""


@pytest.mark.kernel
def test_a_build_with_bad_values_warns_at_their_conf_py_line_and_runs(tmp_path, rootdir):
    page = (
        "\n.. live-settings::\n   :timeout: inf\n"
        + live_cell("import json; print(json.dumps([1]))", "beta")
        + live_cell("print('hello')", "alpha")
        + live_cell("print('never')", "alpha", "   :timeout: nan\n")
    )
    src = procs_site(tmp_path, rootdir, {"page1.rst": page}, conf=CONF_WITH_BAD_VALUES)
    lines = (src / "conf.py").read_text().splitlines()
    app, warnings = build_site(src)
    for name in ("livecells_timeout", "livecells_jobs"):
        number = [i for i, line in enumerate(lines, 1) if line.startswith(name)][-1]  # the last wins
        assert f"conf.py:{number}: WARNING: {name} = " in warnings, warnings
    assert "has type" not in warnings  # no second, unlocated warning from Sphinx
    assert get_config(app.env).timeout == 600 and get_config(app.env).jobs == "auto"
    html = (app.outdir / "page1.html").read_text()
    assert "[1]" in html and "hello" in html  # the stdlib preload ran; preload None is none
    # :timeout: nan is refused where it is written, and that cell does not run.
    text = (src / "page1.rst").read_text()
    for directive in (".. live-settings::", ":timeout: nan"):
        line = line_of(text, directive) - (directive == ":timeout: nan")
        assert f"page1.rst:{line}: ERROR: Error in " in warnings, (directive, warnings)
    assert warnings.count("invalid option value") == 2
    stored = json.loads((src / "_livecells" / "page1.json").read_text())
    assert len(stored["sessions"]["alpha"]["cells"]) == 1
    # The sync code raised after the beta cell: a warning at that cell's line.
    beta_line = line_of(text, ".. live-cell:: beta")
    assert f"page1.rst:{beta_line}: WARNING: live-cell [beta]: the framework's sync code failed" in warnings
    assert "RuntimeError: no device" in warnings and "[livecells.sync]" in warnings


# What -D gives: strings. Every value, refused (depends takes any string: a comma list).
BAD_OVERRIDES = {
    "frameworks": "x", "execute": "nope", "device": "cuda", "timeout": "abc", "jobs": "0",
    "store": "", "raise_on_error": "maybe", "latex_framework": "jax", "allow_html": "maybe",
    "executor": "", "fork_kernels": "2", "output_limit": "1.5", "mime_priority": "html,text/plain,1",
    "launch": "https://x.org/{path}",
    "hosted": "colab",
    "image_options": "width=80%",
    "allow_errors": "maybe", "stderr": "loud", "show_tb": "maybe", "show_host": "maybe",
    "repeat": "many", "warmup": "some", "drift_factor": "big", "drift_floor": "x",
    "keep_warm": "soon",
    "depends_granularity": "file", "slides": "x", "library": "d2l/torch.py",
}  # fmt: skip


@pytest.mark.frameworks
def test_bad_values_given_with_d_are_warnings_naming_d_and_the_defaults_are_used(tmp_path, rootdir):
    from livecells.config import CONFIG_FIELDS, LivecellsConfig

    # Any string is a good list of patterns or a folder.
    assert set(BAD_OVERRIDES) == set(CONFIG_FIELDS) - {"depends", "env_drop", "execute_exclude", "summary_dir"}
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["livecells"]\n')
    (src / "index.rst").write_text("Nothing to run\n==============\n")
    overrides = {f"livecells_{name}": value for name, value in BAD_OVERRIDES.items()}
    app, warnings = build_site(src, confoverrides=overrides)
    for name, value in BAD_OVERRIDES.items():
        shown = "1.5" if name == "output_limit" else repr(value)  # a number is read as one
        assert f"WARNING: livecells_{name} (given with -D) = {shown}: " in warnings, (name, warnings)
    assert warnings.count("WARNING") == len(BAD_OVERRIDES), warnings  # none from Sphinx itself
    assert "conf.py" not in warnings  # not set there
    default = LivecellsConfig()
    for name in BAD_OVERRIDES:
        assert getattr(get_config(app.env), name) == getattr(default, name), name
    good = {"timeout": "2.5", "jobs": "2", "allow_html": "false", "raise_on_error": "yes", "output_limit": "500",
            "depends": "a.txt,b/*.py", "device": "cpu", "latex_framework": "all", "keep_warm": "600"}  # fmt: skip
    (src / "index.rst").write_text("A cell\n======\n" + live_cell("print(1)", "pytorch"))
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={f"livecells_{k}": v for k, v in good.items()})
    assert warnings.count("WARNING") == 2, warnings  # the two patterns below, nothing else
    config = get_config(app.env)
    assert (config.timeout, config.jobs, config.allow_html, config.raise_on_error) == (2.5, 2, False, True)
    assert (config.output_limit, config.depends, config.keep_warm) == (500, ("a.txt", "b/*.py"), 600.0)
    assert "WARNING: livecells_depends (given with -D): 'a.txt' matches no file" in warnings


CONF_WITH_A_BAD_FRAMEWORK = """
livecells_frameworks = {
    "alpha": {"label": "Alpha"},
    "beta": {"label": "Beta", "sync": "x ="},
    "gamma": {"label": "Gamma", "preload": ["json"]},
}
livecells_depends = ["conf.py", 3]
"""


def test_a_bad_framework_entry_is_dropped_at_its_conf_py_line_and_the_others_run(tmp_path, rootdir):
    page = live_cell("print('from alpha')", "alpha") + live_cell("print('from gamma')", "gamma")
    src = procs_site(tmp_path, rootdir, {"page1.rst": page}, conf=CONF_WITH_A_BAD_FRAMEWORK)
    lines = (src / "conf.py").read_text().splitlines()
    app, warnings = build_site(src, kernels=FakeKernels())
    for name in ("livecells_frameworks", "livecells_depends"):
        number = [i for i, line in enumerate(lines, 1) if line.startswith(name)][-1]
        assert f"conf.py:{number}: WARNING: {name}: " in warnings, warnings
    assert "framework 'beta': 'sync' does not compile" in warnings and "that entry is ignored" in warnings
    assert "entry 2 3: not a non-empty string" in warnings
    assert warnings.count("WARNING") == 2, warnings
    config = get_config(app.env)
    assert list(config.frameworks) == ["alpha", "gamma"] and config.depends == ("conf.py",)
    assert config.frameworks["gamma"].preload == ("json",)
    # What Sphinx keeps with its environment is what is used: the next build finds no change.
    assert list(app.config.livecells_frameworks) == ["alpha", "gamma"]
    assert app.config.livecells_depends == ["conf.py"]
    html = (app.outdir / "page1.html").read_text()
    assert "from alpha" in html and "from gamma" in html


@pytest.mark.slow
def test_sphinx_build_with_bad_d_values_warns_and_succeeds(tmp_path, rootdir):
    src = procs_site(tmp_path, rootdir, {})
    (src / "index.rst").write_text("Nothing to run\n==============\n")
    given = ["livecells_execute=nope", "livecells_device=cuda", "livecells_latex_framework=jax"]
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", *[f"-D{d}" for d in given], str(src), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=timing.PROCESS,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    for d in given:
        name, value = d.split("=")
        assert f"WARNING: {name} (given with -D) = {value!r}: " in build.stderr, build.stderr
    assert "Extension error" not in build.stderr and "Traceback" not in build.stderr


def test_a_warning_about_a_value_set_without_its_own_conf_py_line_names_no_document(tmp_path, rootdir):
    src = procs_site(tmp_path, rootdir, {})
    conf = 'extensions = ["livecells"]\nglobals().update(livecells_frameworks={"alpha": {"kernel": "no-such-kernel"}})\n'
    (src / "conf.py").write_text(conf)
    app, warnings = build_site(src, kernels=FakeKernels())
    assert "WARNING: livecells_frameworks['alpha']: no kernelspec named 'no-such-kernel'" in warnings, warnings
    assert "conf.py.rst" not in warnings and "conf.py:" not in warnings


def test_a_conf_py_value_that_fails_when_read_is_replaced_not_left_to_crash_sphinx(tmp_path, rootdir):
    src = procs_site(tmp_path, rootdir, {})
    with open(src / "conf.py", "a") as conf:
        conf.write("class Hostile(dict):\n    def items(self):\n        raise RuntimeError('boom')\n")
        conf.write("livecells_frameworks = Hostile(alpha={})\nlivecells_execute = 'off'\n")
    app, warnings = build_site(src)  # Sphinx pickles its config after reading: items() again
    line = (src / "conf.py").read_text().splitlines().index("livecells_frameworks = Hostile(alpha={})") + 1
    assert f"conf.py:{line}: WARNING: livecells_frameworks: cannot be read (RuntimeError: boom)" in warnings
    assert (app.outdir / "index.html").exists()
