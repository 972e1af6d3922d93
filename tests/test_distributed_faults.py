"""Faults on the neuron backend end in clear errors within the process-group timeout, never in a hang.

Ranks are spawned as plain processes with torchrun's environment (not under
torchrun, whose agent would tear the survivors down itself): a rank that
dies, a peer that never arrives, and ranks that run mismatched collectives.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SCRIPT = os.path.abspath(__file__)


def _run_ranks(scenario: str, world: int, timeout: float, ranks=None, wait_for=None, **env) -> tuple[dict, float]:
    """Run the ranks (all, or only `ranks`) as torchrun would start them: {rank: (returncode, output)}, seconds."""
    from test_distributed_launch import dist_env, free_port, run_together
    port = free_port()
    ranks = list(range(world)) if ranks is None else ranks
    envs = [dist_env(RANK=r, LOCAL_RANK=r, WORLD_SIZE=world, LOCAL_WORLD_SIZE=world, MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port, **env) for r in ranks]
    start = time.monotonic()
    results = run_together([[sys.executable, SCRIPT, scenario] for _ in ranks], timeout=timeout, envs=envs,
                           wait_for=wait_for)
    return dict(zip(ranks, results)), time.monotonic() - start


# The data path: shared memory (ranks of one host, the default) and gloo (as between hosts).
DATA_PATHS = {"shared_memory": {}, "gloo": {"TORCHNEURON_SHM_COLLECTIVES": "0"}}


@pytest.mark.slow
@pytest.mark.parametrize("data", DATA_PATHS)
def test_dead_rank_makes_survivors_fail_fast(data):
    # rank 1 dies; ranks 0 and 2 must fail on their own, well inside the 120 s process-group timeout
    results, elapsed = _run_ranks("dead_rank", 3, timeout=150, PG_TIMEOUT=120, **DATA_PATHS[data])
    for rank in (0, 2):
        code, text = results[rank]
        assert code == 3, f"rank {rank}: {code}\n{text[-3000:]}"  # 3: caught a clear error
        assert "neuron backend: all_reduce" in text and "failed" in text, text[-3000:]
        assert "a peer rank exited" in text
        assert f"data through {data.replace('_', ' ')}" in text, text[-3000:]
        if data == "shared_memory":
            assert "rank 1 (pid" in text and "exited" in text, text[-3000:]  # names the dead rank
        # the group is unusable afterwards, and says so at once instead of waiting again
        assert "second call: neuron backend" in text, text[-3000:]
    assert elapsed < 100, f"the survivors took {elapsed:.0f}s to notice the dead rank"


@pytest.mark.slow
@pytest.mark.parametrize("data", DATA_PATHS)
def test_peer_that_never_arrives_times_out(data):
    # rank 1 stays alive but skips the collective: rank 0 fails when the 6 s timeout expires
    results, elapsed = _run_ranks("absent_peer", 2, timeout=120, wait_for=[0], PG_TIMEOUT=6, **DATA_PATHS[data])
    code, text = results[0]
    assert code == 3, text[-3000:]
    assert "neuron backend: all_reduce" in text and "timeout" in text.lower(), text[-3000:]
    assert f"data through {data.replace('_', ' ')}" in text, text[-3000:]
    assert results[1][0] is None  # the absent rank was still sleeping, and was killed


@pytest.mark.slow
def test_rank_missing_at_init_times_out():
    results, _ = _run_ranks("init_only", 2, timeout=120, ranks=[0], PG_TIMEOUT=5)
    code, text = results[0]
    assert code == 3, text[-3000:]
    assert "timed out" in text.lower() or "timeout" in text.lower(), text[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("checks", ["shared_memory", "network"])
def test_mismatched_collectives_error_clearly_and_group_survives(checks):
    env = {"TORCHNEURON_COLLECTIVE_CHECKS": "network"} if checks == "network" else {}
    results, _ = _run_ranks("mismatch", 2, timeout=150, PG_TIMEOUT=60, **env)
    for rank, (code, text) in results.items():
        assert code == 0, text[-4000:]
        for case in ("shape", "dtype", "op", "gather_size", "broadcast_size"):
            assert f"case {case}: clear error" in text, text[-4000:]
        assert "group still works" in text
        assert f"checks through {checks.replace('_', ' ')}" in text, text[-4000:]
    text = results[0][1]
    assert "rank 0 ran all_reduce(SUM) float32[4]" in text and "rank 1 ran all_reduce(SUM) float32[8]" in text, text
    assert "rank 1 ran all_reduce(SUM) int32[4]" in text, text


@pytest.mark.slow
def test_mismatched_point_to_point_errors_on_both_ranks_and_pairs_survive():
    # send/recv between ranks of one host (PointToPoint.cpp): gloo would abort the receiver (a larger message) or
    # deliver garbage (a smaller one, another dtype); here both ranks raise, naming both ends, and go on
    results, _ = _run_ranks("p2p_mismatch", 2, timeout=150, PG_TIMEOUT=60)
    for rank, (code, text) in results.items():
        assert code == 0, text[-4000:]
        for case in ("larger", "smaller", "dtype", "shape", "isend_first", "irecv_first"):
            assert f"case {case}: clear error" in text, text[-4000:]
        assert "pair still works" in text and "group still works" in text, text[-4000:]
    text = results[0][1]
    assert "rank 0's send float32[8] to rank 1 met rank 1's recv float32[4] from rank 0" in text, text[-4000:]
    assert "rank 0's send float32[4] to rank 1 met rank 1's recv int32[4] from rank 0" in text, text[-4000:]


@pytest.mark.slow
def test_point_to_point_with_a_dead_peer_fails_fast():
    # rank 1 dies: rank 0's recv from it and its send to it (waiting for the recv that never comes) fail on their
    # own, well inside the 120 s process-group timeout, naming the dead rank
    results, elapsed = _run_ranks("p2p_dead_peer", 2, timeout=150, wait_for=[0], PG_TIMEOUT=120)
    code, text = results[0]
    assert code == 3, text[-3000:]
    for call in ("recv on rank 0 of 2", "send on rank 0 of 2"):
        assert f"neuron backend: {call}" in text and "rank 1 (pid" in text and "exited" in text, text[-3000:]
    assert elapsed < 100, f"rank 0 took {elapsed:.0f}s to notice the dead peer"


# ---- the ranks ----------------------------------------------------------------------------------------------

def _rank(scenario: str) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dev = torch.device("neuron", torch.neuron.current_device())
    timeout = timedelta(seconds=float(os.environ["PG_TIMEOUT"]))

    def clear_error(fn) -> str | None:
        try:
            fn()
        except dist.DistBackendError as e:
            return str(e)
        return None

    if scenario == "init_only":
        try:
            dist.init_process_group("neuron", timeout=timeout)
        except Exception as e:  # the store's rendezvous timeout
            print(f"init failed: {type(e).__name__}: {e}", flush=True)
            sys.exit(3)
        sys.exit(0)

    dist.init_process_group("neuron", timeout=timeout)
    print(f"data through {dist.group.WORLD._get_backend(dev).data_transport}", flush=True)
    t = torch.ones(1024, device=dev)
    dist.all_reduce(t)

    if scenario == "dead_rank":
        if rank == 1:
            os._exit(1)  # dies without a word, as after a segfault or an OOM kill
        for _ in range(1000):
            err = clear_error(lambda: dist.all_reduce(t))
            if err:
                print(err, flush=True)
                second = clear_error(lambda: dist.all_reduce(t))
                print(f"second call: {second}", flush=True)
                sys.exit(3)
            time.sleep(0.01)
        sys.exit(0)

    if scenario == "absent_peer":
        if rank == 1:
            time.sleep(600)  # alive but never joins the next collective (the test kills it)
        err = clear_error(lambda: dist.all_reduce(t))
        print(err, flush=True)
        sys.exit(3 if err else 0)

    if scenario == "p2p_mismatch":
        peer = 1 - rank

        def exchange(send, recv_like, send_first=True):
            """Rank 0 sends `send`, rank 1 receives into a tensor like `recv_like`; either posts first."""
            if rank == 0:
                work = dist.isend(send, peer)
            else:
                work = dist.irecv(recv_like, peer)
            if send_first == (rank == 1):
                time.sleep(0.3)  # the other rank's end is posted first
            work.wait()

        cases = {
            "larger": lambda: exchange(torch.ones(8, device=dev), torch.empty(4, device=dev)),
            "smaller": lambda: exchange(torch.ones(4, device=dev), torch.empty(8, device=dev)),
            "dtype": lambda: exchange(torch.ones(4, device=dev), torch.empty(4, dtype=torch.int32, device=dev)),
            "shape": lambda: exchange(torch.ones(2, 4, device=dev), torch.empty(4, 2, device=dev)),
            "isend_first": lambda: exchange(torch.ones(3, device=dev), torch.empty(5, device=dev), send_first=True),
            "irecv_first": lambda: exchange(torch.ones(3, device=dev), torch.empty(5, device=dev), send_first=False),
        }
        for name, fn in cases.items():
            err = clear_error(fn)
            ok = err is not None and "a recv must take the shape and dtype of the send it meets" in err
            print(f"case {name}: {'clear error' if ok else 'NO CLEAR ERROR'}\n{err}", flush=True)
        got = torch.zeros(4, device=dev)
        if rank == 0:
            dist.send(torch.arange(4.0, device=dev), peer)
        else:
            dist.recv(got, peer)
            got = got - torch.arange(4.0, device=dev)  # zero where the message arrived intact
        print("pair still works" if got.abs().sum().item() == 0 else f"pair broken: {got}", flush=True)
        dist.all_reduce(t)
        print("group still works" if t[0].item() == 4.0 else f"group broken: {t[0].item()}", flush=True)
        dist.destroy_process_group()
        sys.exit(0)

    if scenario == "p2p_dead_peer":
        if rank == 1:
            os._exit(1)  # dies without a word
        for call in (lambda: dist.recv(torch.empty(4, device=dev), 1), lambda: dist.send(torch.ones(4, device=dev), 1)):
            err = clear_error(call)
            print(err, flush=True)
            if err is None:
                sys.exit(0)
        sys.exit(3)

    if scenario == "mismatch":
        print(f"checks through {dist.group.WORLD._get_backend(dev).check_transport}", flush=True)
        cases = {
            "shape": lambda: dist.all_reduce(torch.ones(4 if rank == 0 else 8, device=dev)),
            "dtype": lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32,
                                                        device=dev)),
            "op": lambda: dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0),
            "gather_size": lambda: dist.all_gather_into_tensor(
                torch.empty(2 * (4 + rank), device=dev), torch.ones(4 + rank, device=dev)),
            "broadcast_size": lambda: dist.broadcast(torch.ones(3 + rank, device=dev), src=0),
        }
        for name, fn in cases.items():
            err = clear_error(fn)
            ok = err is not None and "disagree on the collective to run" in err
            print(f"case {name}: {'clear error' if ok else 'NO CLEAR ERROR'}\n{err}", flush=True)
        dist.all_reduce(t)  # the group is healthy after a refused collective
        print("group still works" if t[0].item() == 4.0 else f"group broken: {t[0].item()}", flush=True)
        dist.destroy_process_group()
        sys.exit(0)


if __name__ == "__main__":
    _rank(sys.argv[1])
