"""torchneuron plan, and the layouts it plans running for real. Here: the tensor-parallel-only layout's optimizer step
(AdamW's foreach default with parameters that mix DTensor and plain tensors, torch_neuronx/integrations/optim_foreach.py)."""

from __future__ import annotations

from helpers import run_python


def test_optimizer_with_mixed_dtensor_and_plain_parameters_on_neuron():
    """One rank, a 1-core mesh: AdamW's default (foreach) updates a group mixing a DTensor and a plain parameter
    one tensor at a time, as on CPU, with CPU's result; foreach=True gets the cause and the workaround."""
    r = run_python("""
import os, warnings, torch, torch.distributed as dist
from torch.distributed.tensor import distribute_tensor, Replicate, DTensor
from torch.distributed.device_mesh import init_device_mesh
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29700 + os.getpid() % 200))
dist.init_process_group("neuron", rank=0, world_size=1)
mesh = init_device_mesh("neuron", (1,))
torch.manual_seed(0)
w, b = torch.randn(4, 4), torch.randn(4)
def run(device, foreach=None):
    if device == "neuron":
        pw = torch.nn.Parameter(distribute_tensor(w.to(device), mesh, [Replicate()]))
    else:
        pw = torch.nn.Parameter(w.clone())
    pb = torch.nn.Parameter(b.to(device))
    opt = torch.optim.AdamW([pw, pb], lr=0.1, foreach=foreach)
    x = torch.arange(4.0).to(device)
    for _ in range(3):
        full = pw.full_tensor() if isinstance(pw, DTensor) else pw  # differentiable: pw.grad is a DTensor
        loss = ((full @ x + pb * x) ** 2).sum()
        loss.backward()
        opt.step(); opt.zero_grad()
    full = pw.full_tensor() if isinstance(pw, DTensor) else pw
    return full.detach().cpu(), pb.detach().cpu(), opt.param_groups[0]["foreach"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nw, nb, foreach = run("neuron")
cw, cb, _ = run("cpu")
assert foreach is False, foreach
assert any("one tensor at a time" in str(c.message) for c in caught), [str(c.message) for c in caught]
torch.testing.assert_close(nw, cw); torch.testing.assert_close(nb, cb)
try:
    run("neuron", foreach=True)
    raise AssertionError("foreach=True with mixed parameters did not raise")
except RuntimeError as e:
    assert "mixes DTensor and plain tensor parameters" in str(e) and "foreach=False" in str(e), e
dist.destroy_process_group()
print("OK")
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
