"""Compares two pytest JUnit XML reports: the README test command run in this checkout (FSDD recordings present)
and in a bare clone (no ../shared). Every test the bare clone skips that the checkout did not must be an FSDD skip
or a real-AN4 skip (reasons from tests/conftest.py's FSDD_SKIP and AN4_SKIP: ../shared may hold the corpora);
anything else, or a failure, is one line per test and exit status 1.

    python .ci/check_skips.py CHECKOUT.xml BARE.xml
"""
import sys
import xml.etree.ElementTree as ET

FSDD_REASON = "FSDD recordings not found"
DATA_REASONS = (FSDD_REASON, "AN4 recordings not found")


def outcomes(path):
    """{test id: (outcome, message)} with outcome one of passed, skipped, failed."""
    result = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message", "")
            elif child.tag == "skipped" and outcome == "passed":
                outcome, message = "skipped", child.get("message", "")
        result[key] = (outcome, message)
    return result


def main(checkout_xml, bare_xml):
    checkout, bare = outcomes(checkout_xml), outcomes(bare_xml)
    bad = [f"{k}: {o} in the bare clone ({m})" for k, (o, m) in sorted(bare.items())
           if o == "failed" or (o == "skipped" and checkout.get(k, ("",))[0] != "skipped"
                                and not any(r in m for r in DATA_REASONS))]
    bad += [f"{k}: FSDD skip in the checkout, where ../shared has the recordings" for k, (o, m) in checkout.items()
            if o == "skipped" and FSDD_REASON in m]
    fsdd = sum(o == "skipped" and FSDD_REASON in m for o, m in bare.values())
    for line in bad:
        print(line)
    print(f"bare clone: {len(bare)} tests, {fsdd} FSDD skips; checkout: {len(checkout)} tests; "
          f"{len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
