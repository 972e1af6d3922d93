"""A tiny Transformers Llama trains on neuron exactly as on CPU: loss, gradients, AdamW step, bf16 autocast."""

import copy

import torch

from helpers import tiny_llama


def _step(model, batch, opt):
    out = model(batch, labels=batch)
    out.loss.backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
    opt.step()
    opt.zero_grad()
    return out.loss.item(), grads


def test_llama_forward_backward_adamw_matches_cpu():
    cpu = tiny_llama().train()
    dev = copy.deepcopy(cpu).to("neuron")
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-3)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-3)
    batch = torch.randint(0, 256, (2, 32))
    for _ in range(3):
        loss_c, g_c = _step(cpu, batch, opt_c)
        loss_d, g_d = _step(dev, batch.to("neuron"), opt_d)
        assert abs(loss_c - loss_d) < 1e-5
        for name in g_c:
            torch.testing.assert_close(g_d[name], g_c[name], atol=1e-5, rtol=1e-4, msg=name)
    for (name, p_c), (_, p_d) in zip(cpu.named_parameters(), dev.named_parameters()):
        assert p_d.is_neuron
        torch.testing.assert_close(p_d.detach().cpu(), p_c.detach(), atol=1e-4, rtol=1e-4, msg=name)


def test_llama_autocast_bf16_step_matches_cpu_autocast():
    cpu = tiny_llama().train()
    dev = copy.deepcopy(cpu).to("neuron")
    batch = torch.randint(0, 256, (2, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_c = cpu(batch, labels=batch).loss
    with torch.autocast("neuron", dtype=torch.bfloat16):
        loss_d = dev(batch.to("neuron"), labels=batch.to("neuron")).loss
    loss_c.backward()
    loss_d.backward()
    assert abs(loss_c.item() - loss_d.item()) < 2e-2  # bf16 matmuls
    gc = cpu.model.embed_tokens.weight.grad
    gd = dev.model.embed_tokens.weight.grad.cpu()
    assert torch.nn.functional.cosine_similarity(gc.flatten(), gd.flatten(), dim=0) > 0.99


def test_bf16_model_and_generate_match_cpu():
    cpu = tiny_llama().to(torch.bfloat16)
    dev = copy.deepcopy(cpu).to("neuron")
    ids = torch.randint(3, 256, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(dev(ids.to("neuron")).logits.cpu(), cpu(ids).logits, atol=2e-2, rtol=2e-2)
    out_c = cpu.generate(ids, max_new_tokens=8, do_sample=False)
    out_d = dev.generate(ids.to("neuron"), max_new_tokens=8, do_sample=False)
    assert torch.equal(out_d.cpu(), out_c)


def test_conv_net_train_step_matches_cpu():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))
    dev = copy.deepcopy(net).to("neuron")
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    opt_c, opt_d = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(dev.parameters(), lr=0.1)
    for _ in range(2):
        lc = torch.nn.functional.cross_entropy(net(x), y)
        ld = torch.nn.functional.cross_entropy(dev(x.neuron()), y.neuron())
        lc.backward(); ld.backward(); opt_c.step(); opt_d.step(); opt_c.zero_grad(); opt_d.zero_grad()
        assert abs(lc.item() - ld.item()) < 1e-5
    torch.testing.assert_close(dev[1].running_mean.cpu(), net[1].running_mean)
