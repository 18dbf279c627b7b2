#!/usr/bin/env bash
# Installs this checkout with its Python dependencies (pip install -e ., from pyproject.toml; with --test true the
# test extra too: pytest, pytest-xdist, hypothesis, ruff and triton, about 1 GB, for the Triton kernel's interpreter tests) into
# the python3 on PATH (a venv: see README), and with --espeak_ng true also espeak-ng (apt),
# which only the synthesised corpora tiny_zh and tiny_en (the main job) need, and with --lm true the word-LM tools
# of the *_lm decoding modes and run.sh's LM stage: flashlight-text (the [lm] extra) and KenLM's lmplz and
# build_binary, compiled from the kenlm sdist on PyPI (its build needs cmake, a C++ compiler, boost and zlib: apt)
# into python3's bin/ (the venv's), where wenet_udps.lm looks first. Safe to rerun: pip skips what is
# installed, and a torch already installed within pyproject.toml's range (a CUDA build, say) is kept. Every missing
# prerequisite stops it first, with one line saying what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/log.sh

espeak_ng=false   # true: also install espeak-ng with apt (the synthesised corpora tiny_zh, tiny_en need it)
lm=false          # true: also the word-LM tools (flashlight-text; KenLM's lmplz, build_binary into python3's bin/)
test=false        # true: also the test tools (the test extra: pytest, pytest-xdist, hypothesis, ruff, triton)
help_message="Usage: $0 [--espeak_ng true] [--lm true] [--test true]"
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

# apt_install WHAT PACKAGE...: install the packages with apt-get (as root, or with sudo); WHAT names them in errors.
apt_install() {
  local what=$1 sudo=""
  shift
  command -v apt-get >/dev/null 2>&1 || die "${what} is missing and this system has no apt-get: install" \
    "$* (or their equivalents) with its package manager (dnf, pacman, zypper, brew) and rerun"
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "${what} is missing and installing it needs root: run" \
      "'apt-get install $*' as root (or install sudo) and rerun"
    sudo="sudo"
  fi
  log "installing ${what} with apt-get: $*"
  ${sudo} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${sudo} apt-get install -y -qq "$@" >/dev/null
}

if [[ ${espeak_ng} == true ]] && ! command -v espeak-ng >/dev/null 2>&1; then
  apt_install espeak-ng espeak-ng
fi
kenlm_version=0.3.0   # the kenlm sdist on PyPI whose lmplz and build_binary are compiled (tested: 0.3.0)
kenlm_bin="${prefix}/bin"
if [[ ${lm} == true && ! ( -x ${kenlm_bin}/lmplz && -x ${kenlm_bin}/build_binary ) ]]; then
  # KenLM's CMakeLists asks for these boost components; zlib, bzip2 and xz let lmplz read compressed text.
  if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1 \
      || [[ ! -e /usr/include/boost/program_options.hpp || ! -e /usr/include/boost/test/unit_test.hpp \
            || ! -e /usr/include/boost/thread.hpp || ! -e /usr/include/zlib.h ]]; then
    apt_install "KenLM's build tools (cmake, a C++ compiler, boost, zlib)" cmake g++ make libboost-program-options-dev \
      libboost-system-dev libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev
  fi
fi

# KenLM compiles (about a minute) while pip installs: its build needs only the apt tools above and the sdist.
# build_kenlm writes its one-line error to ${kenlm_work}/error; the work folder is kept (with its logs) when it fails.
build_kenlm() {
  local work=$1
  fail() { echo "$*" > "${work}/error"; exit 1; }
  python3 -m pip download --quiet --no-deps --no-binary kenlm -d "${work}" "kenlm==${kenlm_version}" \
    > "${work}/download.log" 2>&1 || fail "pip could not download the kenlm ${kenlm_version} sdist from the package" \
      "index; check the network and rerun (log: ${work}/download.log)"
  tar -xzf "${work}/kenlm-${kenlm_version}.tar.gz" -C "${work}" || fail "could not unpack the kenlm sdist in ${work}"
  cmake -S "${work}/kenlm-${kenlm_version}" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release >"${work}/cmake.log" 2>&1 \
    || fail "cmake could not configure KenLM: $(tail -n 1 "${work}/cmake.log") (log: ${work}/cmake.log)"
  cmake --build "${work}/build" --target lmplz build_binary -j "$(nproc 2>/dev/null || echo 2)" \
    >"${work}/build.log" 2>&1 || fail "KenLM did not compile: $(grep -m 1 -i error "${work}/build.log")" \
    "(log: ${work}/build.log)"
  install -m 755 "${work}/build/bin/lmplz" "${work}/build/bin/build_binary" "${kenlm_bin}/" \
    || fail "could not install lmplz and build_binary into ${kenlm_bin}"
}
kenlm_pid=""
if [[ ${lm} == true && ! ( -x ${kenlm_bin}/lmplz && -x ${kenlm_bin}/build_binary ) ]]; then
  kenlm_work=$(mktemp -d)
  log "building KenLM's lmplz and build_binary from the kenlm ${kenlm_version} sdist in the background (in" \
    "${kenlm_work})"
  build_kenlm "${kenlm_work}" &
  kenlm_pid=$!
fi

torch_version() { python3 -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true; }
torch_before=$(torch_version)
extras=()
[[ ${test} == true ]] && extras+=(test)
[[ ${lm} == true ]] && extras+=(lm)
target=.
[[ ${#extras[@]} -eq 0 ]] || target=".[$(IFS=,; echo "${extras[*]}")]"
log "pip install -e ${target} (this checkout and pyproject.toml's dependencies, so python3 -m wenet_udps.* and" \
  "tools/ work from any directory; python3: ${prefix})"
python3 -m pip install -e "${target}"
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
# The UDPS C++ CPU kernel is compiled once here (about 20 s; cached by torch), so that no training waits for it.
log "building the C++ UDPS CPU kernel (wenet_udps.kernels.cpu_ext; without a compiler the eager kernels serve)"
python3 -c 'from wenet_udps.kernels.cpu_ext import ext_available; print("cpu_ext:", ext_available())' \
  || log "the C++ kernel did not build: the eager kernels serve (slower UDPS on CPU)"
if [[ -n ${kenlm_pid} ]]; then
  wait "${kenlm_pid}" \
    || die "$(cat "${kenlm_work}/error" 2>/dev/null || echo "KenLM's build stopped (in ${kenlm_work})")"
  rm -rf "${kenlm_work}"
  log "installed lmplz and build_binary in ${kenlm_bin}"
fi
if [[ ${lm} == true ]]; then
  python3 -c 'from flashlight.lib.text.decoder.kenlm import KenLM' \
    || die "flashlight-text does not import after pip installed it: see the error above"
  log "word-LM tools ready: ${kenlm_bin}/lmplz, ${kenlm_bin}/build_binary, flashlight-text"
fi
if command -v espeak-ng >/dev/null 2>&1; then
  log "environment ready: torch ${torch_after}, $(espeak-ng --version | head -n 1)"
else
  log "environment ready: torch ${torch_after}; no espeak-ng, which the synthesised corpora tiny_zh and tiny_en" \
    "(the main job) need: rerun with --espeak_ng true for them"
fi
