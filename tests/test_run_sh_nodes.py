"""run.sh stage 4 on several nodes (issue 69): two torchrun nodes on the loopback, one CPU process each (gloo),
trained as one node with two processes would train; a lost node; nodes started with other settings; the data
partition over nodes, processes and DataLoader workers. The recipes' README gives these commands."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from tests.recipe_trees import make_aishell
from wenet_udps.train.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
# One worker runs this module (pytest-xdist --dist loadgroup), so that its module fixtures (a prepared corpus and two
# trainings) are made once, not on each worker and again whenever a worker comes back to the module.
pytestmark = pytest.mark.xdist_group("nodes")
# 16 training utterances, 2 ranks, batches of 2: 4 steps an epoch, a step checkpoint after each
TINY = ("max_epoch=2 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=32 "
        "decoder_conf.linear_units=32 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=2 accum_grad=1 "
        "save_interval=1")
# One thread a process: the same arithmetic in every run compared; eager UDPS tiles (no 30 s compile)
ENV = dict(os.environ, OMP_NUM_THREADS="1", WENET_UDPS_COMPILE="0")
TIMEOUT = 20   # --dist_timeout of these runs (a killed process is noticed at once; a silent one after this)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_sh(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "run.sh"), *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=ENV)


def ok(proc: subprocess.CompletedProcess) -> str:
    # run.sh logs to stderr; torchrun's own output, the reason a training failed, goes to stdout (tee'd to train.log).
    assert proc.returncode == 0, proc.stderr[-4000:] + "\n--- stdout ---\n" + proc.stdout[-4000:]
    return proc.stderr + proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--nproc_per_node", "0"], "--nproc_per_node takes an integer >= 1, got '0'"),
    (["--gpus", "0", "--nproc_per_node", "2"], "--nproc_per_node is for training on the CPU; with --gpus"),
    (["--num_nodes", "2"], "--num_nodes 2 trains through torchrun: give --gpus, or --nproc_per_node"),
    (["--dist_timeout", "0"], "--dist_timeout takes a number of seconds > 0, got '0'"),
    (["--HOST_NODE_ADDR", "node0"], "--HOST_NODE_ADDR takes node 0's host:port, e.g. node0:29400, got 'node0'"),
    # issue 80, I: both started torchrun (a traceback in train.log); a ceiling, checked before any work
    (["--HOST_NODE_ADDR", "localhost:99999"], "--HOST_NODE_ADDR localhost:99999: port 99999 is not a TCP port "
                                              "(1..65535)"),
    (["--HOST_NODE_ADDR", "localhost:0"], "port 0 is not a TCP port (1..65535)"),
    (["--nproc_per_node", "100000"],
     f"--nproc_per_node 100000 is more than this machine's {len(os.sched_getaffinity(0))} CPUs"),
    (["--num_nodes", "2", "--nproc_per_node", "1", "--node_rank", "1", "--stage", "5"],
     "--node_rank 1: stages 5-7 run on node 0, which holds the checkpoints"),
])
def test_node_options_are_checked_before_any_work(tmp_path, args, message):
    proc = run_sh("--stage", 4, "--dir", tmp_path / "exp", *args)
    assert proc.returncode != 0 and message in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
    assert not list(tmp_path.iterdir())


def test_help_names_the_node_options():
    out = run_sh("--help").stdout
    for option in ("--nproc_per_node", "--num_nodes", "--node_rank", "--HOST_NODE_ADDR", "--dist_timeout"):
        assert f"  {option} " in out, option
    assert "--nproc_per_node N (CPU, gloo)" in out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A prepared fake AISHELL (stages 0-3) and the run every multi-node run must equal: one node, two processes,
    the same global batch (2 x 2 utterances)."""
    root = tmp_path_factory.mktemp("nodes")
    make_aishell(root / "dl", (("train", "S0002", 16), ("dev", "S0724", 2), ("test", "S0764", 2)))
    common = ["--corpus", "aishell", "--download_dir", root / "dl", "--data", root / "data", "--families", "scaled_dot",
              "--prepare_opts", "--allow_partial true", "--num_workers", 2, "--train_override", TINY,
              "--dist_timeout", TIMEOUT]
    ok(run_sh(*common, "--stage", 0, "--stop_stage", 3))
    ok(run_sh(*common, "--stage", 4, "--stop_stage", 4, "--nproc_per_node", 2, "--dir", root / "ref",
              "--HOST_NODE_ADDR", f"127.0.0.1:{free_port()}"))
    return {"root": root, "common": common, "ref": root / "ref_scaled_dot"}


def start_node(cluster, rank: int, port: int, prefix: Path, log: Path) -> subprocess.Popen:
    """One node's run.sh, stage 4, as the recipes' README gives it (its own session: the test kills its tree)."""
    args = [*cluster["common"], "--stage", 4, "--stop_stage", 4, "--num_nodes", 2, "--nproc_per_node", 1,
            "--node_rank", rank, "--HOST_NODE_ADDR", f"127.0.0.1:{port}", "--dir", prefix]
    with open(log, "w") as out:
        return subprocess.Popen(["bash", str(ROOT / "run.sh"), *map(str, args)], cwd=ROOT, env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)


def two_nodes(cluster, prefix0: Path, prefix1: Path, tag: str):
    port, logs = free_port(), [cluster["root"] / f"{tag}_node{r}.log" for r in (0, 1)]
    nodes = [start_node(cluster, r, port, p, log) for r, p, log in zip((0, 1), (prefix0, prefix1), logs)]
    return nodes, logs


def finish(nodes, logs):
    codes = [node.wait(timeout=600) for node in nodes]
    return codes, [log.read_text() for log in logs]


def assert_same_training(a: Path, b: Path) -> None:
    """Bitwise: every weight and optimizer-state tensor, the step and the epoch."""
    x, y = (torch.load(p, map_location="cpu", weights_only=True) for p in (a, b))
    assert (x["step"], x["epoch"]) == (y["step"], y["epoch"])
    assert x["model"].keys() == y["model"].keys()
    for name, tensor in x["model"].items():
        assert torch.equal(tensor, y["model"][name]), name
    for i, state in x["optimizer"]["state"].items():
        for name, tensor in state.items():
            assert torch.equal(torch.as_tensor(tensor), torch.as_tensor(y["optimizer"]["state"][i][name])), (i, name)


def tree(pid: int):
    """``pid`` and its descendants (torchrun starts its workers in sessions of their own)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


@pytest.fixture(scope="module")
def loopback(cluster):
    """Two nodes on the loopback, one process each. Node 1 has an exp dir of its own, as a machine without shared
    storage has: it must never be made (node 1 needs nothing from it: rank 0 sends it the checkpoint)."""
    root = cluster["root"]
    codes, out = finish(*two_nodes(cluster, root / "two", root / "node1" / "two", "two"))
    return {"codes": codes, "out": out, "exp": root / "two_scaled_dot", "prefix": root / "two"}


@pytest.mark.slow
def test_two_nodes_on_the_loopback_train_as_one_node_with_two_processes(cluster, loopback):
    codes, out, exp = loopback["codes"], loopback["out"], loopback["exp"]
    assert codes == [0, 0], out[0][-3000:] + out[1][-3000:]
    assert_same_training(exp / "final.pt", cluster["ref"] / "final.pt")
    # node 0 wrote everything, node 1 nothing
    assert not (cluster["root"] / "node1").exists()
    assert "nothing is written here" in out[1] and "saved" not in out[1]
    names = {p.name for p in exp.iterdir()}
    assert {".lock", ".run.lock", ".train.stamp", "train.log", "train.yaml", "tensorboard", "final.pt", "epoch_1.pt",
            "step_8.pt"} <= names, names
    assert list((exp / "tensorboard").iterdir()) and "training done" in (exp / "train.log").read_text()
    # every training utterance once an epoch, over 2 ranks x 2 DataLoader workers (counted on every rank, summed)
    for epoch in (0, 1):
        assert load_checkpoint(str(exp / f"epoch_{epoch}.pt"))  # verifies its SHA-256
        assert (exp / f"epoch_{epoch}.yaml").read_text().count("used: 16\n") == 1


@pytest.mark.slow
def test_stages_5_to_7_on_node_0_after_two_nodes(cluster, loopback):
    """Averaging, decoding, export and the results table read node 0's exp dir as after any training."""
    assert loopback["codes"] == [0, 0]
    exp = loopback["exp"]
    log = ok(run_sh(*cluster["common"], "--stage", 5, "--stop_stage", 7, "--dir", loopback["prefix"],
                    "--average_num", 2, "--decode_modes", "ctc_greedy_search", "--test_sets", "test"))
    assert (exp / "avg_2.pt").is_file() and (exp / "test" / "ctc_greedy_search" / "wer").is_file()
    assert list((exp / "sherpa").glob("*.onnx")) and "stage 7: results table" in log
    assert "| test |" in (cluster["root"] / "RESULTS.md").read_text()


@pytest.mark.slow
def test_a_lost_node_stops_the_other_and_the_same_commands_resume(cluster):
    """Node 1, killed with SIGKILL in epoch 0, stops node 0 at once, naming rank 1; the checkpoints stay; the same
    two commands resume and end where an uninterrupted run ends, bitwise. Node 1's exp dir is its own (no shared
    storage): it resumes from the checkpoint rank 0 sends it."""
    root = cluster["root"]
    exp, node1 = root / "lost_scaled_dot", root / "node1_lost" / "lost"
    nodes, logs = two_nodes(cluster, root / "lost", node1, "lost")
    try:
        deadline = time.time() + 300
        while not (exp / "step_2.yaml").exists():   # step 2 of 4 in epoch 0
            assert nodes[0].poll() is None and time.time() < deadline, logs[0].read_text()[-3000:]
            time.sleep(0.05)
        for pid in tree(nodes[1].pid):
            os.kill(pid, signal.SIGKILL)
        killed = time.time()
        nodes[0].wait(timeout=TIMEOUT + 60)
        stopped = time.time() - killed
    finally:
        for node in nodes:
            if node.poll() is None:
                for pid in tree(node.pid):
                    os.kill(pid, signal.SIGKILL)
    out = logs[0].read_text()
    print(f"node 0 stopped {stopped:.1f} s after node 1 was killed")
    assert nodes[0].returncode != 0 and "rank 0: a node is lost: rank 1 sent no heartbeat" in out, out[-3000:]
    assert f"stage 4: training {exp} failed" in out and stopped < TIMEOUT, (stopped, out[-3000:])
    assert not (exp / "final.pt").exists() and not (exp / "epoch_1.pt").exists()
    written = sorted(exp.glob("step_*.pt"))
    assert written
    for path in written:
        load_checkpoint(str(path))  # every checkpoint written verifies against its recorded SHA-256
    newest = max(written, key=lambda p: int(p.stem.split("_")[1]))

    codes, out = finish(*two_nodes(cluster, root / "lost", node1, "again"))
    assert codes == [0, 0], out[0][-3000:] + out[1][-3000:]
    assert f"resuming from {newest}" in out[0]
    assert_same_training(exp / "final.pt", cluster["ref"] / "final.pt")
    assert not (root / "node1_lost").exists()


def start_torchrun_nodes(cluster, tmp_path, extra=((), ()), code1=ROOT, module="wenet_udps.bin.train", args=None):
    """Two torchrun nodes (one process each) of ``module``, each with its ``extra`` arguments, node 1 with the code
    in ``code1``; their outputs go to a pipe each."""
    port = free_port()
    data = cluster["root"] / "data"
    args = args or ["--config", cluster["ref"] / "train.yaml", "--train_data", data / "train" / "data.list",
                    "--cv_data", data / "dev" / "data.list", "--model_dir", tmp_path / "exp", "--dist_timeout", TIMEOUT]
    procs = []
    for rank, code in ((0, ROOT), (1, code1)):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
               "--node_rank", str(rank), "--rdzv_backend", "static", "--rdzv_endpoint", f"127.0.0.1:{port}",
               "--max_restarts", "0", "-m", module, *map(str, args), *map(str, extra[rank])]
        procs.append(subprocess.Popen(cmd, cwd=code, env=dict(ENV, PYTHONPATH=str(code)), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    return procs


def torchrun_nodes(*args, **kwargs):
    """:func:`start_torchrun_nodes`, then each node's (exit code, output)."""
    return [(p.wait(timeout=300), p.stdout.read()) for p in start_torchrun_nodes(*args, **kwargs)]


def test_a_silent_node_stops_the_other_within_the_timeout(cluster, tmp_path):
    """A node that stops answering without closing its connections (SIGSTOP: a hung machine, a cut network) is
    noticed after --dist_timeout (5 s here) and named; SIGKILL is noticed at once (the test above)."""
    timeout = 5
    extra = ["--override", "max_epoch=50", "--dist_timeout", timeout]   # the later --dist_timeout wins
    nodes = start_torchrun_nodes(cluster, tmp_path, extra=(extra, extra))
    stalled = []
    try:
        deadline = time.time() + 300
        while not (tmp_path / "exp" / "epoch_0.yaml").exists():
            assert nodes[0].poll() is None and time.time() < deadline, nodes[0].stdout.read()[-3000:]
            time.sleep(0.05)
        stalled = tree(nodes[1].pid)
        for pid in stalled:
            os.kill(pid, signal.SIGSTOP)
        stopped_at = time.time()
        code = nodes[0].wait(timeout=timeout + 120)
        took = time.time() - stopped_at
    finally:
        for pid in stalled or tree(nodes[1].pid):
            os.kill(pid, signal.SIGKILL)
        if nodes[0].poll() is None:
            nodes[0].kill()
    out = nodes[0].stdout.read()
    print(f"node 0 stopped {took:.1f} s after node 1 was stopped (--dist_timeout {timeout})")
    assert code != 0 and "rank 0: a node is lost: rank 1 sent no heartbeat for 4 s" in out, out[-3000:]
    assert timeout <= took < timeout + 30, took
    assert not (tmp_path / "exp" / "epoch_49.pt").exists()


@pytest.mark.parametrize("what", ["conf", "data", "code"])
def test_a_node_with_other_settings_is_refused_before_training(cluster, tmp_path, what):
    """Another conf, data list or commit on node 1: both nodes stop at the first collective, naming the rank and
    the difference; nothing is trained or written."""
    extra1, code1 = (), ROOT
    if what == "conf":
        extra1 = ["--override", "dataset_conf.batch_conf.batch_size=4"]
        expected = "config dataset_conf.batch_conf.batch_size: 2 -> 4"
    elif what == "data":
        lines = (cluster["root"] / "data" / "train" / "data.list").read_text().splitlines(keepends=True)
        (tmp_path / "other.list").write_text("".join(lines[:-1]))
        extra1 = ["--train_data", tmp_path / "other.list"]   # the later --train_data wins
        expected = "--train_data (SHA-256): "
    else:
        shutil.copytree(ROOT / "wenet_udps", tmp_path / "code" / "wenet_udps",
                        ignore=shutil.ignore_patterns("__pycache__"))
        with open(tmp_path / "code" / "wenet_udps" / "train" / "trainer.py", "a") as f:
            f.write("# another commit\n")
        code1 = tmp_path / "code"
        expected = "code: the wenet_udps sources differ (SHA-256 "
    results = torchrun_nodes(cluster, tmp_path, extra=((), extra1), code1=code1)
    for code, out in results:
        assert code != 0, out[-3000:]
        assert "rank 1 was started with other settings than rank 0 (rank 0's -> rank 1's): " in out, out[-3000:]
        assert expected in out and "refused before training" in out, out[-3000:]
    assert not (tmp_path / "exp").exists()


def test_rank_0s_refusal_stops_every_node(cluster, tmp_path):
    """Rank 0 alone reads the model dir; when it refuses to train (here: a resume with another batch size), every
    rank stops with its reason, not just node 0 while node 1 waits."""
    (tmp_path / "exp").mkdir()
    for name in ("epoch_0.pt", "epoch_0.yaml"):
        shutil.copy(cluster["ref"] / name, tmp_path / "exp" / name)
    other = ["--override", "dataset_conf.batch_conf.batch_size=4", "--checkpoint", "auto"]
    results = torchrun_nodes(cluster, tmp_path, extra=(other, other))
    for rank, (code, out) in enumerate(results):
        assert code != 0, out[-3000:]
        assert "this resume changes what the run trains on: dataset_conf.batch_conf.batch_size: 2 -> 4" in out
    assert "rank 0 refused to train: --checkpoint " in results[1][1], results[1][1][-3000:]
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == [".lock", "epoch_0.pt", "epoch_0.yaml"]


@pytest.mark.parametrize("data_type", ["raw", "shard"])
def test_every_utterance_once_an_epoch_over_nodes_processes_and_workers(cluster, tmp_path, data_type):
    """The training loader as bin.train builds it, on 2 torchrun nodes x 1 process x 3 DataLoader workers: each
    utterance of the list exactly once an epoch, every rank a share of its own, another order each epoch."""
    data = cluster["root"] / "data" / "train"
    listed = [json.loads(line)["key"] for line in (data / "data.list").read_text().splitlines()]
    data_list = data / "data.list"
    if data_type == "shard":   # 16 utterances in 6 shards: ranks read whole shards
        data_list = tmp_path / "shards.list"
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_shard_list.py"), "--num_utts_per_shard", "3",
                        data / "wav.scp", data / "text", tmp_path / "shards", data_list], cwd=ROOT, env=ENV,
                       check=True, capture_output=True)
    args = ["--config", cluster["ref"] / "train.yaml", "--train_data", data_list, "--data_type", data_type,
            "--num_workers", 3, "--out", tmp_path / "seen.json"]
    for code, out in torchrun_nodes(cluster, tmp_path, module="tests.train.partition_worker", args=args):
        assert code == 0, out[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    for epoch in ("0", "1"):
        ranks = seen[epoch]
        assert len(ranks) == 2 and all(ranks), ranks
        assert Counter(k for keys in ranks for k in keys) == Counter(listed), epoch
    assert seen["0"] != seen["1"]
