"""The student kit's own files (`make student`): its README (English, then Chinese), its
requirements and its Makefile, which makes the kit's virtual environment and notices one
copied from another folder (:mod:`.kit` writes the rest of the kit)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from ._io import BOOK_ROOT, _load, _source

__all__ = ["README", "MAKEFILE", "REQUIREMENTS", "write_kit_files"]

README = """\
# Student kit: {title}

{chapters}

*中文说明见下半部分：[学生包（中文）](#学生包中文)。*

## Start, with make (Linux, macOS)

You need Python 3.11 or newer (`python3 --version`) and `make`. In this folder:

```bash
make lab
```

The first run creates `.venv` in this folder, installs `requirements.txt` into it (a few
minutes) and opens JupyterLab on the chapters; later runs open it in seconds. With no internet,
put a `wheelhouse/` folder (below) in this folder: `make lab` then installs from it alone
(`make lab WHEELHOUSE=/path/to/wheelhouse` names another folder).

## Start without make (Windows, or no make)

Linux and macOS, in this folder:

```bash
python3 -m venv .venv
.venv/bin/python -m pip install --no-index --find-links wheelhouse -r requirements.txt
.venv/bin/jupyter lab
```

Windows, in PowerShell (or cmd) in this folder:

```powershell
py -3 -m venv .venv
.venv\\Scripts\\python -m pip install --no-index --find-links wheelhouse -r requirements.txt
.venv\\Scripts\\jupyter lab
```

With internet and no wheelhouse, leave out `--no-index --find-links wheelhouse`. `py -3.12 -m venv
.venv` picks one of several installed Pythons. Nothing needs to be activated (so PowerShell's
script policy does not matter): the commands run the programs in `.venv` by their path. Later
sessions need only the last line.

## A wheelhouse, for a room with no internet

A wheelhouse is a folder of the packages' files (wheels), made once on a machine with internet:

```bash
python3 -m pip download -r requirements.txt -d wheelhouse
```

It serves machines with the same operating system, CPU architecture and Python version as the
machine that made it (NumPy's and JupyterLab's helpers are built for each), and the book needs
Python 3.11 or newer. For other machines, make one wheelhouse per kind, from any machine with
internet, by naming their platform and Python version:

```bash
python3 -m pip download -r requirements.txt pywinpty colorama -d wheelhouse-windows --only-binary=:all: --platform win_amd64 --python-version 3.12
python3 -m pip download -r requirements.txt appnope -d wheelhouse-mac --only-binary=:all: --platform macosx_11_0_arm64 --python-version 3.12
```

(`win_amd64`: 64-bit Windows on Intel or AMD; `macosx_11_0_arm64`: a Mac with Apple silicon;
`python -m pip debug --verbose`, run on a student machine, lists the platform tags it accepts.)
pip, run on Linux, still reads the packages' conditions as Linux's, so it leaves out what only
Windows needs (`pywinpty`, `colorama`) or only a Mac needs (`appnope`): the commands name them.
Safest of all: make each wheelhouse on a machine of that kind, with the first command.
Copy the wheelhouse into this folder as `wheelhouse/`.

## Preparing one machine, then copying it

Copy this folder *without* `.venv`, with `wheelhouse/`, and let each machine make its own
`.venv`. A `.venv` works only in the folder it was made in: its programs (`jupyter`, `pip`)
and its `pyvenv.cfg` name that folder, so a copy in another folder or on another machine fails
("bad interpreter", or on Windows "Fatal error in launcher"). `make lab` notices a `.venv` made
in another folder (it records the folder when it installs), says so, and makes it again, from
`wheelhouse/` when there is one. Without make, delete the copied `.venv` (`rm -rf .venv`; in
PowerShell `Remove-Item -Recurse -Force .venv`) and run the commands above.

## The exercises

Each chapter runs from top to bottom. The exercises have their code cells (or a cell saying
"your code here"); run the checker cell under each to see whether your answer is right, and
which mistake it is if it is a known one. JupyterLab numbers the exercises 1, 2, 3 within each
chapter; the book's site and slides number them through the whole book, and each exercise on a
slide shows both numbers ("Exercise 16 (chapter exercise 2)").

## What is in the kit

- the chapters, without the solutions of their exercises, and the diagrams they show
  (`figures/`); the same chapters in Chinese in `zh/`;
- `attnbook/`, the book's helper package (plots, live figures, checkers);
- `requirements.txt` (JupyterLab with `jupyterlab-myst`, which shows the book's boxes,
  exercises and math as the site does) and this folder's `Makefile`.

{key}

## 学生包（中文）

{chapters_zh}

### 用make启动（Linux、macOS）

需要Python 3.11或更高版本（用`python3 --version`查看）和`make`。在本文件夹中运行：

```bash
make lab
```

第一次运行会在本文件夹中创建`.venv`，把`requirements.txt`中的包装进去（需要几分钟），然后在JupyterLab中打开各章；以后再运行只需几秒。没有网络时，把一个`wheelhouse/`文件夹（见下文）放进本文件夹，`make lab`就只从它安装（`make lab WHEELHOUSE=/path/to/wheelhouse`可以指定别的文件夹）。

### 不用make启动（Windows，或没有make的机器）

Linux和macOS，在本文件夹中运行：

```bash
python3 -m venv .venv
.venv/bin/python -m pip install --no-index --find-links wheelhouse -r requirements.txt
.venv/bin/jupyter lab
```

Windows，在本文件夹中打开PowerShell（或cmd）运行：

```powershell
py -3 -m venv .venv
.venv\\Scripts\\python -m pip install --no-index --find-links wheelhouse -r requirements.txt
.venv\\Scripts\\jupyter lab
```

能联网又没有wheelhouse时，去掉`--no-index --find-links wheelhouse`。装了多个Python时，用`py -3.12 -m venv .venv`这样的写法选一个。不需要激活虚拟环境（所以PowerShell的脚本执行策略不影响）：上面的命令按路径直接运行`.venv`中的程序。以后每次上课只需运行最后一行。

### wheelhouse：给没有网络的教室

wheelhouse是一个存放各个包的安装文件（wheel）的文件夹，在一台能联网的机器上做一次即可：

```bash
python3 -m pip download -r requirements.txt -d wheelhouse
```

它只适用于**操作系统、CPU架构和Python版本**都与制作它的机器相同的机器（NumPy和JupyterLab所依赖的一些包是按平台分别编译的），而且本书需要Python 3.11或更高版本。要给别的机器用，就按机器的种类各做一个wheelhouse：在任何一台能联网的机器上，写明目标平台和Python版本：

```bash
python3 -m pip download -r requirements.txt pywinpty colorama -d wheelhouse-windows --only-binary=:all: --platform win_amd64 --python-version 3.12
python3 -m pip download -r requirements.txt appnope -d wheelhouse-mac --only-binary=:all: --platform macosx_11_0_arm64 --python-version 3.12
```

（`win_amd64`是Intel或AMD处理器上的64位Windows；`macosx_11_0_arm64`是Apple芯片的Mac；在学生机器上运行`python -m pip debug --verbose`，可以列出它接受的平台标签。）在Linux上运行的pip仍按Linux来判断各个包的依赖条件，会漏掉只有Windows需要的包（`pywinpty`、`colorama`）和只有Mac需要的包（`appnope`），所以上面的命令把它们写了出来。最稳妥的做法是在同类机器上用第一条命令制作wheelhouse。把做好的wheelhouse复制到本文件夹中，命名为`wheelhouse/`。

### 在一台机器上准备好，再复制到其他机器

复制本文件夹时**不要**带上`.venv`，但要带上`wheelhouse/`，让每台机器自己创建`.venv`。`.venv`只能在创建它的那个文件夹中使用：它里面的程序（`jupyter`、`pip`）和`pyvenv.cfg`都写着那个文件夹的路径，复制到别的文件夹或别的机器上就会失败（报“bad interpreter”，在Windows上报“Fatal error in launcher”）。`make lab`能发现在别的文件夹中创建的`.venv`（安装时它记下了所在的文件夹），会说明情况并重新创建它；有`wheelhouse/`时就从中安装。不用make时，先删掉复制过来的`.venv`（`rm -rf .venv`；PowerShell中用`Remove-Item -Recurse -Force .venv`），再运行上面的命令。

### 练习

每一章都从头到尾运行。练习有自己的代码单元格（或者一个写着“your code here”的单元格）；运行每个练习下面的检查单元格，就能知道答案对不对；如果是常见的错误，它还会指出是哪一种。JupyterLab在每一章内把练习编号为1、2、3；本书的网站和幻灯片在全书范围内连续编号，幻灯片上的每个练习同时显示这两个编号（“练习 16（本章第 2 题）”）。

### 学生包里有什么

- 各章（不含练习的解答）和它们用到的示意图（`figures/`）；同样的各章的中文版在`zh/`中；
- `attnbook/`，本书的辅助包（绘图、交互图、检查函数）；
- `requirements.txt`（JupyterLab和`jupyterlab-myst`，后者像网站一样显示本书的提示框、练习和数学公式）和本文件夹的`Makefile`。

{key_zh}
"""

KEY_SEALED = """\
The answer key of this kit's own exercises is not in it: {sealed} exist in `attnbook` only as
the calls the chapters make (anything else raises an error saying so), and the checkers of
the exercises carry their cases and the wrong answers they recognise as data (the code that
computed them is not in the kit either).{kept}"""

KEY_INCLUDED = "This kit includes the book's whole answer key (`attnbook.reference`)."

KEY_SEALED_ZH = """\
本学生包不含其中练习的参考答案：{sealed}在`attnbook`中只保留各章实际发出的调用（其他调用都会报错并说
明原因）；这些练习的检查函数以数据的形式自带测试用例和它们能识别的错误答案（计算它们的代码也不在学生包
中）。{kept}"""

KEY_INCLUDED_ZH = "本学生包含有本书完整的参考实现（`attnbook.reference`）。"

REQUIREMENTS = """\
numpy>=2,<3
matplotlib>=3.8,<4
threadpoolctl>=3
ipywidgets>=8,<9
anywidget>=0.11,<0.12
ipykernel>=6
jupyterlab>=4.4,<4.5        # jupyterlab-myst 2.7 needs JupyterLab 4.4
jupyterlab-myst>=2.4,<3     # exercises, admonitions and math render as on the site
"""

MAKEFILE = """\
# The student kit: `make lab` creates .venv here and opens JupyterLab on the chapters.
# Offline: with a wheelhouse/ folder here it installs from that alone (or WHEELHOUSE=path).
# A .venv works only in the folder it was made in (its programs' first lines and pyvenv.cfg
# name that folder): one copied here from elsewhere is noticed and made again.
SHELL := /bin/bash
PYTHON ?= python3
WHEELHOUSE ?= $(if $(wildcard wheelhouse/*.whl),wheelhouse,)
PIP_OPTS := $(if $(WHEELHOUSE),--no-index --find-links "$(abspath $(WHEELHOUSE))",)
HERE := $(CURDIR)/.venv
# The folder .venv was made in: written at install into its stamp; for a .venv made without
# make (no stamp), read from the first line of its pip (#!/that/folder/.venv/bin/python)
MADE_IN := $(shell if [ -e .venv/.installed ]; then cat .venv/.installed; \\
  elif [ -e .venv/bin/pip ]; then head -n 1 .venv/bin/pip | \\
  sed -n -e 's|^\\#!\\(.*\\)/bin/python[0-9.]*$$|\\1|p'; fi)

.PHONY: lab check-venv FORCE
lab: .venv/.installed
\t.venv/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)"

# Says whether .venv belongs to this folder (exit status 1 if it was made elsewhere).
check-venv:
\t@if [ -z "$(MADE_IN)" ]; then echo "No .venv here yet: make lab creates it."; \\
\telif [ "$(MADE_IN)" = "$(HERE)" ]; then echo ".venv belongs to this folder."; \\
\telse echo ".venv was made in $(or $(MADE_IN),another folder), not here: make lab makes it again."; exit 1; fi

ifneq ($(MADE_IN),)
ifneq ($(MADE_IN),$(HERE))
.venv/.installed: FORCE
endif
endif
FORCE:

.venv/.installed: requirements.txt
\t@if [ -n "$(MADE_IN)" ] && [ "$(MADE_IN)" != "$(HERE)" ]; then \\
\t  echo "The .venv in this folder was made in $(or $(MADE_IN),another folder) and does not work"; \\
\t  echo "here (its programs name that folder): making it again$(if $(WHEELHOUSE), from $(WHEELHOUSE)/)."; \\
\t  rm -rf .venv; fi
\t@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "The book \\
\tneeds Python 3.11 or newer ($(PYTHON) is older): install one, or name it, PYTHON=python3.12"; \\
\texit 1; }
\t@test -x .venv/bin/python || $(PYTHON) -m venv .venv
\t.venv/bin/python -m pip install $(PIP_OPTS) --quiet --disable-pip-version-check \\
\t  -r requirements.txt || { echo "pip failed. With no internet, put a wheelhouse/ folder \\
\there (see README.md) or give WHEELHOUSE=/path/to/wheelhouse."; exit 1; }
\t@echo "$(HERE)" > $@
"""


def _titles(notebooks, folder=None):
    """The chapters' list: `- name: title`, the title read from folder's copy when it has one."""
    titles = []
    for path in notebooks:
        path = Path(path)
        if folder is not None and (folder / path.name).exists():
            path = folder / path.name
        first = next((c for c in _load(path)["cells"] if c["cell_type"] == "markdown"), None)
        heading = re.search(r"^# (.+)$", _source(first), re.M) if first else None
        titles.append(f"- `{path.name}`: {heading.group(1) if heading else path.stem}")
    return titles


def write_kit_files(outdir: Path, notebooks, sealed, kept, key: bool) -> None:
    titles = _titles(notebooks)
    titles_zh = [t.replace("- `", "- `zh/", 1) for t in _titles(notebooks, BOOK_ROOT / "zh" / "chapters")]
    names = ", ".join(f"`reference.{n}`" for n in sealed)
    kept_names = ", ".join(f"`reference.{n}`" for n in kept)
    if key or not sealed:
        key_text = KEY_INCLUDED if key else "No answer-key function is an exercise of this kit."
        key_zh = KEY_INCLUDED_ZH if key else "本学生包的练习不要求写参考实现中的函数。"
    else:
        key_text = KEY_SEALED.format(
            sealed=names,
            kept=("" if not kept else " Kept as code, because the chapters call them too often to "
                  "record: " + kept_names + "."))
        key_zh = KEY_SEALED_ZH.format(
            sealed="、".join(f"`reference.{n}`" for n in sealed),
            kept="" if not kept else "各章调用过于频繁、无法记录的"
            + "、".join(f"`reference.{n}`" for n in kept) + "保留为代码。")
    title = "Attention, computed" if len(notebooks) != 1 else titles[0].split(": ", 1)[1]
    key_text = textwrap.fill(key_text, 95, break_on_hyphens=False)
    key_zh = key_zh.replace("\n", "")  # Chinese is not wrapped: a line break shows as a space
    (outdir / "README.md").write_text(README.format(
        title=title, chapters="\n".join(titles), key=key_text,
        chapters_zh="\n".join(titles_zh), key_zh=key_zh), encoding="utf-8")
    requirements = REQUIREMENTS
    if any("torch" in _load(p).get("metadata", {}).get("attnbook", {}).get("requires", [])
           for p in notebooks):
        requirements += "torch==2.13.0  # the PyTorch chapter (CPU build; keep the pin)\n"
    if any("triton" in _load(p).get("metadata", {}).get("attnbook", {}).get("requires", [])
           for p in notebooks):
        requirements += "triton==3.9.0  # the Triton pages (the interpreter runs on the CPU)\n"
    (outdir / "requirements.txt").write_text(requirements, encoding="utf-8")
    (outdir / "Makefile").write_text(MAKEFILE, encoding="utf-8")
