"""The docs tell the truth (issue 37): what README.md and docs/ quote exists and matches.

- every repository path quoted in backticks or linked exists;
- every test a doc cites (``tests/x.py`` followed by backticked ``test_name``\\ s) is defined in that file;
- every ``run.sh --option`` quoted is an option of run.sh;
- conf values the docs state match the confs;
- the README's numbers appear in the docs it cites, it is at most 160 lines, makes its venv before any pip install,
  and states only what ran.
"""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]
TOP = ("wenet_udps/", "tools/", "conf/", "tests/", "docs/", "recipes/", "bench/", ".ci/")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def conf(path):
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_quoted_paths_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = []
    for token in re.findall(r"`([^`\n]+)`", text):
        for word in token.split():
            word = word.rstrip(".,;:)").split("::")[0].split("#")[0]
            if word.startswith(TOP) and not re.search(r"[<>*{}$\[\]|]|\.\.\.", word):
                if not (ROOT / word).exists():
                    missing.append(word)
    for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://|mailto:", link) and not (doc.parent / link).exists():
            missing.append(link)
    assert not missing, f"{doc.name} quotes paths that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_cited_tests_are_defined_in_the_file_named(doc):
    wrong = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        # "tests/a.py `test_x`, `test_y`; tests/b.py `test_z`": each name belongs to the path before it.
        path = None
        for m in re.finditer(r"(tests/[\w/]+\.py)|`(test_\w+)", line):
            if m.group(1):
                path = m.group(1)
            elif path is not None:
                source = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).is_file() else ""
                if not re.search(rf"^\s*def {m.group(2)}\(", source, re.M):
                    wrong.append(f"{path} {m.group(2)}")
    assert not wrong, f"{doc.name} cites tests not defined where it says: {wrong}"


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_quoted_run_sh_options_exist(doc):
    options = set(re.findall(r"^([a-z_A-Z]+)=", (ROOT / "run.sh").read_text(encoding="utf-8"), re.M))
    unknown = []
    for command in re.findall(r"run\.sh((?: +--?\w+(?:[ =](?:\"[^\"]*\"|[^\s`|-][^\s`|]*))?)+)",
                              doc.read_text(encoding="utf-8")):
        command = re.sub(r'"[^"]*"', "", command)   # a quoted value holds another script's options
        unknown += [o for o in re.findall(r"--(\w+)", command) if o not in options | {"help"}]
    assert not unknown, f"{doc.name} quotes run.sh options that do not exist: {unknown}"


def test_conf_values_the_docs_state():
    tiny, fsdd = conf("conf/tiny_zh/train_conformer.yaml"), conf("conf/fsdd/train_conformer.yaml")
    small = (ROOT / "docs/small_confs.md").read_text(encoding="utf-8")
    row = next(line for line in small.splitlines() if line.startswith("| `max_epoch` | 10 |"))
    assert "tiny_en); 10 (fsdd" in row and f"{fsdd['max_epoch']} since" in row, row
    bench = (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    batch = tiny["dataset_conf"]["batch_conf"]["batch_size"]
    factor = int(tiny["encoder_conf"]["input_layer"].removeprefix("conv2d") or 4)
    assert f"batches of {batch})" in bench and f"the {factor}x subsampling" in bench
    assert f"({tiny['max_epoch']} epochs x {800 // batch} batches x" in bench
    # README: "spec_aug_conf.mask_value: mean, set in every conf here that uses it".
    assert "`spec_aug_conf.mask_value: mean`, set in every conf here that uses it" in README
    for path in sorted((ROOT / "conf").rglob("*.yaml")):
        data = conf(path.relative_to(ROOT)).get("dataset_conf") or {}
        if data.get("spec_aug"):
            assert data["spec_aug_conf"]["mask_value"] == "mean", path


def test_readme_numbers_appear_in_the_docs_they_cite():
    cited = "\n".join(p.read_text(encoding="utf-8") for p in DOCS if p.name != "README.md")
    # means ± std, and confidence intervals (the docs' tables give the difference in a column of its own)
    numbers = re.findall(r"-?\d+\.\d+ ± \d+\.\d+|\[[+-]?\d+\.\d+, [+-]?\d+\.\d+\]", README)
    assert len(numbers) >= 20
    assert [n for n in numbers if n not in cited] == []


def test_readme_is_short_and_true():
    assert len(README.splitlines()) <= 160
    # A literal reader makes the venv before installing anything into it.
    assert README.index("python3 -m venv") < README.index("pip install")
    # Claims of issue 37: what ran and what did not is said, not implied, and agrees with the pages that record it.
    assert "reproduce the UDPS paper" not in README
    kernel_tests = next(line for line in (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8").splitlines()
                        if line.startswith("| native kernel tests"))
    assert ("never run on a GPU" in README) == kernel_tests.rstrip(" |").endswith("not run")
    for corpus in ("aishell", "librispeech"):
        recipe = (ROOT / "recipes" / corpus / "README.md").read_text(encoding="utf-8")
        said = "Not run yet: the AISHELL-1 and LibriSpeech" in " ".join(README.split())   # wrapping does not matter
        assert said == ("**Results.** None measured yet." in recipe), corpus
    assert "idle machine" in README and "--keep_checkpoints averaged" in README
    assert re.search(r"\d+(\.\d+)? GB", README) and "24 checkpoints" in README


def test_machine_is_named_the_same_way():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "Intel(R) Xeon(R)" not in text or "AMD EPYC" in text, f"{doc.name}: name both CPUs the VMs had"
