"""Guard of the kept-hypotheses mechanism (tools/run_lib.sh kept_by): every script that keeps decodes under
recipes/<corpus>/hypotheses/ (the research tables' evidence, committed for the next session) binds its folder with
kept_by, found from the scripts themselves, so a new research script cannot keep cells that no record ties to the
code and inputs that made them."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Scripts that keep hypotheses by another mechanism, each with its reason.
OWN_MECHANISM = {
    "recipes/an4/issue81_seed.sh": "every decode is made by a pinned checkout whose commit and clean state it checks "
                                   "against hypotheses/issue81/COMMIT (tests/test_an4_issue81_seed.py)",
}
KEEPS = re.compile(r"recipes/[^\s\"']*/hypotheses/|hypotheses/issue")
CALLS = re.compile(r"^\s*(?:#[^\n]*\n\s*)*kept_by\s", re.M)


def unbound(path: Path) -> bool:
    """True for a shell script that names a hypotheses folder to keep decodes in but never calls kept_by."""
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    code = "\n".join(lines)
    return bool(KEEPS.search(code)) and not CALLS.search(code)


def test_every_script_keeping_hypotheses_binds_them():
    scripts = sorted(p for p in ROOT.glob("recipes/**/*.sh") if KEEPS.search(p.read_text(encoding="utf-8")))
    assert {"recipes/tiny_biasing.sh", "recipes/an4/biasing_no_harm.sh"} <= {str(p.relative_to(ROOT))
                                                                            for p in scripts}
    bad = [str(p.relative_to(ROOT)) for p in scripts
           if unbound(p) and str(p.relative_to(ROOT)) not in OWN_MECHANISM]
    assert bad == [], f"keep hypotheses without tools/run_lib.sh kept_by: {bad}"


def test_the_guard_finds_a_script_that_bypasses_it(tmp_path):
    """Shown failing: the no-harm script with its kept_by calls removed is flagged."""
    source = (ROOT / "recipes" / "an4" / "biasing_no_harm.sh").read_text(encoding="utf-8")
    bypass = tmp_path / "bypass.sh"
    bypass.write_text("\n".join(line for line in source.splitlines() if "kept_by " not in line) + "\n")
    assert unbound(bypass) and not unbound(ROOT / "recipes" / "an4" / "biasing_no_harm.sh")
