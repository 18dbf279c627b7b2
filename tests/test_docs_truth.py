"""The docs tell the truth (issue 37): what README.md and docs/ quote exists and matches.

- every repository path quoted in backticks or linked exists;
- every test a doc cites (``tests/x.py`` followed by backticked ``test_name``\\ s) is defined in that file;
- every ``run.sh --option`` quoted is an option of run.sh;
- conf values the docs state match the confs;
- the README's numbers appear in the docs it cites, it is at most 160 lines, makes its venv before any pip install,
  and states only what ran;
- issue 68: every mean ± std and every interval the README and the recipe READMEs give is in docs/, each difference
  beside its interval; the README's main-job table is docs/experiments.md's, and every recorded model of the main job
  lies within the "fine if" range the README gives; the README's results table is its recipes' RESULTS; each recipe
  README is command, data, then dated results.
"""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]
TOP = ("wenet_udps/", "tools/", "conf/", "tests/", "docs/", "recipes/", "bench/", ".ci/")
README = (ROOT / "README.md").read_text(encoding="utf-8")
RECIPES = sorted((ROOT / "recipes").glob("*/README.md"))
# docs/, each run of white space one space (a number may wrap across lines)
SOURCES = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in sorted((ROOT / "docs").glob("*.md")))
MEAN_STD = r"-?\d+\.\d+ ± \d+\.\d+"
INTERVAL = r"\[[+-]?\d+\.\d+, [+-]?\d+\.\d+\]"
MODES = ["attention", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring"]


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
    kernel_tests = next(line for line in (ROOT / "docs/gpu.md").read_text(encoding="utf-8").splitlines()
                        if line.startswith("| native kernel tests"))
    assert ("never run on a GPU" in README) == kernel_tests.rstrip(" |").endswith("not run")
    gpu_row = next(row for row in table(README, "corpus (recipe)") if "aishell" in row[0])
    for corpus in ("aishell", "librispeech"):
        recipe = (ROOT / "recipes" / corpus / "README.md").read_text(encoding="utf-8")
        said = gpu_row[2:4] == ["not run", "not run"]
        assert said == section(recipe, "## Results").startswith("None measured yet"), corpus
    assert "idle machine" in README and "--keep_checkpoints averaged" in README
    assert re.search(r"\d+(\.\d+)? GB", README) and "24 checkpoints" in README


def test_machine_is_named_the_same_way():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "Intel(R) Xeon(R)" not in text or "AMD EPYC" in text, f"{doc.name}: name both CPUs the VMs had"


def table(text, first_header):
    """The rows (lists of stripped cells) of the markdown table whose header's first cell is ``first_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\| {re.escape(first_header)} \|", line))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([re.sub(r"[¹²³⁴*]", "", c).strip() for c in line.strip().strip("|").split("|")])
    return rows


def section(text, heading):
    """What follows ``heading`` up to the next heading of its level or above, stripped."""
    level = heading.split()[0]
    body = text.split(heading + "\n", 1)[1]
    return re.split(rf"^#{{1,{len(level)}}} ", body, flags=re.M)[0].strip()


def differences(text):
    """``(difference, interval)`` pairs: a signed number followed by its bracketed 95 % interval."""
    return re.findall(rf"([+-]\d+\.\d+)(?: points,?)?(?: 95 % CI)?\s+({INTERVAL})", text)


def beside(number, interval, text, reach=45):
    """Whether ``text`` gives ``interval`` with ``number`` in the ``reach`` characters before it."""
    return any(number in text[max(0, m.start() - reach):m.start()] for m in re.finditer(re.escape(interval), text))


@pytest.mark.parametrize("doc", [ROOT / "README.md", *RECIPES], ids=ids([ROOT / "README.md", *RECIPES]))
def test_results_are_the_docs_numbers(doc):
    """Issue 68: the README's and the recipes' tables are summaries; each number is in docs/, where its command and
    date are, and a difference is given there with the same interval."""
    text = " ".join(doc.read_text(encoding="utf-8").split())
    numbers = re.findall(f"{MEAN_STD}|{INTERVAL}", text)
    assert [n for n in numbers if n not in SOURCES] == []
    pairs = differences(text)
    assert [p for p in pairs if not beside(*p, SOURCES)] == []
    if doc.name == "README.md" and doc.parent == ROOT:
        assert len(pairs) >= 15, pairs   # the verdict table


def test_the_main_job_table_is_the_recorded_one_and_its_range_holds_every_run():
    """Issue 68, newcomer point 1: the README's "fine if" range excluded what the default run printed. The table is
    docs/experiments.md's; every model recorded there (the default run, each seed) lies in its mode's range."""
    experiments = (ROOT / "docs/experiments.md").read_text(encoding="utf-8")
    readme = {row[0]: row[1:] for row in table(README, "test CER %")}
    default = {row[0]: row[1:] for row in table(section(experiments, "## What does the main job print?"),
                                                "attention type")}
    seeds = table(section(experiments, "## How much does the seed move it?"), "attention type")
    healthy = table(section(experiments, "## What range is a healthy run?"), "range")
    assert readme["fine if within"] == healthy[0][1:]
    ranges = [tuple(float(x) for x in cell.split("-")) for cell in healthy[0][1:]]
    for label, attention in (("scaled-dot", "scaled-dot"), ("UDPS", "udps")):
        assert readme[f"{label}, seed 777"] == default[attention]
        mean = next(row[2:] for row in seeds if row[0] == attention and row[1] == "mean ± std")
        assert readme[f"{label}, seeds 1-3"] == [c if c != "-" else "not recorded" for c in mean]
    models = list(default.values()) + [row[2:] for row in seeds if row[1] != "mean ± std"]
    for cells in models:
        for mode, cell, (low, high) in zip(MODES, cells, ranges):
            if cell != "-":
                assert low <= float(cell) <= high, (mode, cell, low, high)
    for label in ("scaled-dot", "UDPS"):   # and the seeds' means
        for mode, cell, (low, high) in zip(MODES, readme[f"{label}, seeds 1-3"], ranges):
            if "±" in cell:
                assert low <= float(cell.split()[0]) <= high, (label, mode, cell)
    assert "seed 777" in README and "bash run.sh" in README


def test_the_results_table_is_the_recipes_results():
    """Each row's numbers are in the RESULTS of the recipe it links; ESPnet's published figure too."""
    rows = table(README, "corpus (recipe)")
    assert len(rows) >= 8
    for row in rows:
        link = re.search(r"\]\((recipes/\w+/README\.md)\)", row[0]).group(1)
        results = section((ROOT / link).read_text(encoding="utf-8"), "## Results")
        for cell in row[2:4]:
            assert cell == "not run" or cell in results, (row[0], cell)
        published = re.search(r"\d+\.\d+", row[5])
        assert not published or published.group() in results, row


@pytest.mark.parametrize("recipe", RECIPES, ids=ids(RECIPES))
def test_recipe_readmes_are_command_data_results(recipe):
    """icefall's form (issue 68): the command first, the data, then the results with their conf, date and commit."""
    text = recipe.read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", text, re.M)
    assert heads[0] == "Command" and "Data" in heads and heads[-1] == "Results", heads
    assert re.search(r"^## Command\n\n```bash\n(#.*\n)*bash run\.sh", text, re.M)
    assert "|---|" in section(text, "## Data")
    results = section(text, "## Results")
    assert results.startswith("None measured yet") or (
        re.search(r"20\d\d-\d\d-\d\d", results) and "conf/" in results and "|---|" in results)
