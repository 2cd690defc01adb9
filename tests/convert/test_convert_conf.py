"""``convert`` of a tree carries its d2lbook ``config.ini`` into the book's ``conf.py``
(:mod:`livecells.convert.book_conf`): d2lbook's rules for one repository or one per tab, its
defaults, the chapters' ``# required_libs``, the block rewritten and nothing else. d2l-en's own
config.ini, converted and built against d2lbook's notebooks: tests/render/test_hosted_d2l.py."""

from __future__ import annotations

import configparser
import textwrap
from pathlib import Path

from livecells.config import read_config
from livecells.convert.book_conf import BEGIN, D2LBOOK_DEFAULTS, END, conf_values
from livecells.convert.md_blocks import required_libs
from livecells.convert.tree import convert_tree

from helpers import livecells_cli, no_report, said

CHAPTER = """\
```{.python .input}
%load_ext d2lbook.tab
tab.interact_select(['pytorch'])
#required_libs('gym==0.21.0', "syne-tune[gpsearchers]==0.3.2")
```

# Page

```{.python .input}
from d2l import torch as d2l
```
"""


def ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read_string(textwrap.dedent(text))
    return parser


def values(text: str, tabs: list[str], requires: dict | None = None) -> tuple[dict, list[str]]:
    said: list[str] = []
    return conf_values(ini(text), tabs, requires or {}, said.append), said


def test_required_libs_are_read_as_d2lbook_reads_them():
    assert required_libs(CHAPTER) == ["gym==0.21.0", '"syne-tune[gpsearchers]==0.3.2"']
    assert required_libs("%load_ext d2lbook.tab\n# required_libs()") == []
    assert required_libs("%load_ext d2lbook.tab") == []


def test_one_repository_for_the_book_gives_its_libs_to_every_framework():
    got, said = values("""
        [project]
        release = 2.1
        [colab]
        github_repo = org/book-colab
        libs = d2l, d2l==RELEASE
               gym, gym
        libs_header = Install these.
        """, ["pytorch"])  # fmt: skip
    assert said == []
    assert got == {
        "release": "2.1",
        "livecells_hosted": {"colab": {
            "libs": {"pytorch": {"d2l": "d2l==RELEASE", "gym": "gym"}},
            "gpu_pattern": "gpu",
            "header": "Install these.",
        }},
        "livecells_launch": {"colab": {"pytorch": "https://colab.research.google.com/github/org/book-colab/blob/master/{path}"}},
    }  # fmt: skip
    read_config({"frameworks": {"pytorch": {}}, "hosted": got["livecells_hosted"], "launch": got["livecells_launch"]}, no_report)


def test_d2lbooks_defaults_and_rules_for_what_the_file_leaves_out():
    got, said = values("""
        [build]
        tabs = pytorch, mxnet
        [colab]
        github_repo = pytorch, org/pt-colab
                      mxnet, org/mx-colab
                      paddle, org/pd-colab
        libs = pytorch, d2l, d2l==RELEASE
               mxnet, d2l
        [sagemaker]
        github_repo = org/book-sagemaker
        libs = d2l, d2l==RELEASE
        """, ["pytorch", "mxnet"])  # fmt: skip
    assert said == ["config.ini [colab] libs, line 2: 2 items, not 3: left out"]
    colab, sagemaker = got["livecells_hosted"]["colab"], got["livecells_hosted"]["sagemaker"]
    assert "release" not in got and colab["release"] == "0.0.1"  # d2lbook's default release
    assert colab["libs"] == {"pytorch": {"d2l": "d2l==RELEASE"}}
    assert colab["header"] == D2LBOOK_DEFAULTS["colab"]["libs_header"] and colab["gpu_pattern"] == "gpu"
    assert list(got["livecells_launch"]["colab"]) == ["pytorch", "mxnet"]  # not a tab of the book: left out
    # SageMaker: one kernel (d2lbook's default), its ==RELEASE from [library] version (empty here).
    assert sagemaker["kernel"] == "conda_python3" and sagemaker["release"] == ""
    assert sagemaker["header"] == D2LBOOK_DEFAULTS["sagemaker"]["libs_header"]
    assert got["livecells_frameworks"] == {"pytorch": {}, "mxnet": {}}


def test_slides_as_d2lbook_reads_its_slides_section():
    # d2l-en's [slides]; a repository for a tab the book does not have, and a row of one item.
    got, problems = values("""
        [slides]
        top_right = <img height=80px src='http://d2l.ai/_static/logo-with-text.png'/>
        github_repo = pytorch, d2l-ai/d2l-pytorch-slides
                      jax, d2l-ai/d2l-jax-slides
                      mxnet
        """, ["pytorch", "mxnet"])  # fmt: skip
    assert problems == ["config.ini [slides] github_repo, line 3: 1 items, not 2: left out"]
    assert got == {"livecells_slides": {
        "top_right": "<img height=80px src='http://d2l.ai/_static/logo-with-text.png'/>",
        "github_repo": {"pytorch": "d2l-ai/d2l-pytorch-slides"},
    }}  # fmt: skip
    warnings: list[str] = []
    read_config({"frameworks": {"pytorch": {}, "mxnet": {}}, "slides": got["livecells_slides"]}, said(warnings))
    assert warnings == []
    # No github_repo: d2lbook makes no slides.
    assert values("[slides]\ntop_left = <b>x</b>\n", ["pytorch"]) == ({}, [])


def test_library_as_d2lbook_reads_its_library_sections(tmp_path):
    """d2l-en's [library] and [library-*] (two of them), each setting's text as configparser
    gives it (an empty one kept: d2lbook tells it from a missing one), and each file's head,
    what d2lbook keeps above its warning line; reverse_alias and deprecated settings not carried."""
    (tmp_path / "d2l").mkdir()
    (tmp_path / "d2l" / "torch.py").write_text(
        "DATA_HUB = dict()\n\n#################   WARNING   ################\n# The below part\n"
    )
    (tmp_path / "d2l" / "mxnet.py").write_text("def hand_kept():\n    pass\n")
    told: list[str] = []
    got = conf_values(ini("""
        [library]
        version_file = d2l/__init__.py
        save_mark = @save
        [library-mxnet]
        lib_file = d2l/mxnet.py
        lib_name = np
        fluent_alias =
        [library-pytorch]
        lib_file = d2l/torch.py
        lib_name = torch
        simple_alias = ones_like, ones,
                       exp(, concat -> cat
        alias =
               nn_Module = nn.Module
        reverse_alias =
               d2l.nn_Module -> nn.Module
        [library-jax]
        lib_name = jnp
        """), ["pytorch", "mxnet", "jax"], {}, told.append, tmp_path)  # fmt: skip
    assert got == {"livecells_library": {
        "version_file": "d2l/__init__.py",
        "pytorch": {
            "lib_file": "d2l/torch.py", "lib_name": "torch", "simple_alias": "ones_like, ones,\nexp(, concat -> cat",
            "alias": "\nnn_Module = nn.Module", "header": "DATA_HUB = dict()\n\n",
        },
        "mxnet": {"lib_file": "d2l/mxnet.py", "lib_name": "np", "fluent_alias": ""},
    }}  # fmt: skip
    assert told == [
        "config.ini [library] save_mark: deprecated in d2lbook, not carried",
        f"{tmp_path / 'd2l' / 'mxnet.py'}: no d2lbook warning line: d2lbook's build lib would replace all of it; "
        "livecells leaves it as it is until livecells_library gives its 'header'",
        "config.ini [library-jax]: no lib_file: not carried",
    ]
    warnings: list[str] = []
    config = read_config({"frameworks": {"pytorch": {}, "mxnet": {}}, "library": got["livecells_library"]}, said(warnings))
    assert warnings == [] and [f.module for f in config.library.files] == ["d2l.torch", "d2l.mxnet"]


def test_a_service_without_a_repository_is_none():
    got, _ = values("[colab]\nlibs = d2l, d2l\n[sagemaker]\nkernel = k\n", ["pytorch"])
    assert got == {}


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


CONFIG = "[build]\ntabs = pytorch\n[project]\nrelease = 1.0\n[colab]\ngithub_repo = org/colab\nlibs = d2l, d2l==RELEASE\n"


def test_a_tree_gets_a_conf_py_and_converting_again_rewrites_only_its_block(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, {"config.ini": CONFIG, "ch/rl.md": CHAPTER, "ch/plain.md": "# Plain\n"})
    said: list[str] = []
    convert_tree(src, out, markdown=True, warn=said.append)
    assert said == [f"{out / 'conf.py'}: livecells_frameworks, release, livecells_hosted, livecells_launch from config.ini"]
    conf = (out / "conf.py").read_text()
    assert conf.startswith("extensions = ['myst_parser', 'livecells']\n")
    namespace: dict = {}
    exec(conf, namespace)
    assert namespace["livecells_hosted"]["colab"]["requires"] == {"ch/rl": ["gym==0.21.0", '"syne-tune[gpsearchers]==0.3.2"']}
    # The author's own lines stay; the block is replaced where it is, not added again.
    (out / "conf.py").write_text("project = 'Mine'\n" + conf + "html_theme = 'furo'\n")
    (src / "config.ini").write_text(CONFIG.replace("release = 1.0", "release = 1.1"))
    convert_tree(src, out, markdown=True, warn=said.append)
    again = (out / "conf.py").read_text()
    assert again.startswith("project = 'Mine'\n") and again.endswith("html_theme = 'furo'\n")
    assert again.count(BEGIN) == 1 and again.count(END) == 1 and 'release = "1.1"' in again
    assert again.replace('"1.1"', '"1.0"') == "project = 'Mine'\n" + conf + "html_theme = 'furo'\n"


def test_a_value_conf_py_sets_itself_is_left_to_it(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, {"config.ini": CONFIG, "ch/plain.md": "# Plain\n"})
    write(out, {"conf.py": "livecells_frameworks = {'pytorch': {'kernel': 'd2l-pytorch'}}\n"})
    said: list[str] = []
    convert_tree(src, out, markdown=True, warn=said.append)
    assert said[-1] == f"{out / 'conf.py'}: sets livecells_frameworks itself: config.ini's left out"
    namespace: dict = {}
    exec((out / "conf.py").read_text(), namespace)
    assert namespace["livecells_frameworks"] == {"pytorch": {"kernel": "d2l-pytorch"}}
    assert namespace["release"] == "1.0"


def test_a_tree_without_config_ini_gets_no_conf_py(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, {"ch/plain.md": "# Plain\n"})
    convert_tree(src, out, markdown=True, warn=lambda message: None)
    assert not (out / "conf.py").exists()


def test_the_command_line_says_what_it_wrote(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, {"config.ini": CONFIG, "ch/rl.md": CHAPTER})
    result = livecells_cli("convert", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert f"livecells convert: {out / 'conf.py'}: livecells_frameworks, release, livecells_hosted" in result.stderr
