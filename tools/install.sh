#!/usr/bin/env bash
# Installs this checkout with its Python dependencies and test tools (pip install -e ".[test]", from
# pyproject.toml) into the python3 on PATH (a venv: see README), and with --espeak_ng true also espeak-ng (apt),
# which only the synthesised corpora tiny_zh and tiny_en (the main job) need. Safe to rerun: pip skips what is
# installed, and a torch already installed within pyproject.toml's range (a CUDA build, say) is kept. Every missing
# prerequisite stops it first, with one line saying what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/log.sh

espeak_ng=false   # true: also install espeak-ng with apt (the synthesised corpora tiny_zh, tiny_en need it)
help_message="Usage: $0 [--espeak_ng true]"
. tools/parse_options.sh
[[ $# -eq 0 ]] || die "unexpected arguments: $* ($0 --help for usage)"

min_free_gb=3   # a venv with the CPU build of torch takes 2.3 GB, with a CUDA build 5 GB (docs/experiments.md)
venv_hint="python3 -m venv ~/venvs/wenet_udps && . ~/venvs/wenet_udps/bin/activate"

command -v python3 >/dev/null 2>&1 || die "python3 not found: install Python >= 3.10 with pip and venv" \
  "(Debian/Ubuntu: sudo apt-get install python3 python3-venv) and rerun"
# One probe answers every Python question (so a stub python3 in tests/tools/test_install.py can fake each case).
probe=$(python3 -c '
import importlib.util, os, sys, sysconfig
print("version=%d.%d" % sys.version_info[:2])
print("pip=%d" % (importlib.util.find_spec("pip") is not None))
print("in_venv=%d" % (sys.prefix != sys.base_prefix))
print("managed=%d" % os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))
print("ensurepip=%d" % (importlib.util.find_spec("ensurepip") is not None))
print("prefix=" + sys.prefix)
') || die "python3 ($(command -v python3)) does not run; install Python >= 3.10 and rerun"
fact() { sed -n "s/^$1=//p" <<<"${probe}"; }

version=$(fact version)
IFS=. read -r major minor <<<"${version}"
(( major > 3 || (major == 3 && minor >= 10) )) || die "python3 is Python ${version}; wenet_udps needs" \
  "Python >= 3.10: install a newer one (e.g. sudo apt-get install python3.11 python3.11-venv), make a venv with it" \
  "and rerun"
if [[ $(fact in_venv) == 0 && $(fact managed) == 1 ]]; then
  [[ $(fact ensurepip) == 1 ]] || die "python3 is the system's Python and cannot make a venv (no venv module):" \
    "sudo apt-get install python3-venv, then ${venv_hint}, and rerun"
  die "python3 is the system's Python (externally managed, pip may not install into it): make and activate a" \
    "venv first: ${venv_hint}, and rerun"
fi
[[ $(fact pip) == 1 ]] || die "python3 ($(fact prefix)) has no pip: run 'python3 -m ensurepip'" \
  "(or sudo apt-get install python3-pip) and rerun"

prefix=$(fact prefix)
free_kb=$(df -Pk "${prefix}" | awk 'NR == 2 { print $4 }')
(( free_kb >= min_free_gb * 1024 * 1024 )) || die "only $(( free_kb / 1024 / 1024 )) GB free where python3" \
  "installs (${prefix}); the packages need ${min_free_gb} GB or more (5 GB with a CUDA torch): free some space" \
  "and rerun"

if [[ ${espeak_ng} == true ]] && ! command -v espeak-ng >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "espeak-ng is missing and this system has no apt-get: install" \
    "espeak-ng with its package manager (dnf, pacman, zypper, brew install espeak-ng) and rerun"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "espeak-ng is missing and installing it needs root: run" \
      "'apt-get install espeak-ng' as root (or install sudo) and rerun"
    sudo="sudo"
  fi
  log "installing espeak-ng with apt-get"
  ${sudo} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${sudo} apt-get install -y -qq espeak-ng >/dev/null
fi

torch_version() { python3 -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true; }
torch_before=$(torch_version)
log "pip install -e .[test] (this checkout and pyproject.toml's dependencies, so python3 -m wenet_udps.* and" \
  "tools/ work from any directory; python3: ${prefix})"
python3 -m pip install -e ".[test]"
torch_after=$(torch_version)
torch_range=$(sed -n 's/^ *"torch\([^"]*\)".*/\1/p' pyproject.toml)
if [[ -z ${torch_before} ]]; then
  log "installed torch ${torch_after}"
elif [[ ${torch_before} == "${torch_after}" ]]; then
  log "kept the installed torch ${torch_before} (within ${torch_range})"
else
  log "replaced torch ${torch_before} (outside ${torch_range}) by torch ${torch_after}"
fi
installed=$(cd / && python3 -c 'import os, wenet_udps; print(os.path.dirname(wenet_udps.__path__[0]))')
[[ ${installed} -ef ${PWD} ]] || die "python3 imports wenet_udps from ${installed}, not from this checkout" \
  "(${PWD}); unset PYTHONPATH and rerun"
# The UDPS C++ CPU kernel is compiled once here (about 30 s; cached by torch), so that no training waits for it.
log "building the C++ UDPS CPU kernel (wenet_udps.kernels.cpu_ext; without a compiler the eager kernels serve)"
python3 -c 'from wenet_udps.kernels.cpu_ext import ext_available; print("cpu_ext:", ext_available())' \
  || log "the C++ kernel did not build: the eager kernels serve (slower UDPS on CPU)"
if command -v espeak-ng >/dev/null 2>&1; then
  log "environment ready: torch ${torch_after}, $(espeak-ng --version | head -n 1)"
else
  log "environment ready: torch ${torch_after}; no espeak-ng, which the synthesised corpora tiny_zh and tiny_en" \
    "(the main job) need: rerun with --espeak_ng true for them"
fi
