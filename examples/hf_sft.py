"""TRL supervised fine-tuning on neuron, single process, unmodified TRL: SFTTrainer with wrapped packing
(static shapes), batches padded to a multiple of 128 by TRL itself on neuron, optional --torch_compile true
(Transformers picks the "neuron" backend by itself), losses compared step by step with a CPU run of the same seed.

    python examples/hf_sft.py                                   # tiny CI size: max_length 96 -> padded to 128
    python examples/hf_sft.py --max_length 2048 --max_steps 4   # full-size blocks
    python examples/hf_sft.py --torch_compile true              # compiled training step, backend "neuron"
    python examples/hf_sft.py --use_cpu true                    # the CPU run (the reference)

Every SFTConfig / TrainingArguments flag works (`--learning_rate`, `--bf16 true`, ...). By default the script
also runs the CPU reference in a subprocess and asserts that the losses agree (--compare_cpu false to skip).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import torch  # noqa: E402

DEFAULTS = dict(packing=True, packing_strategy="wrapped", max_length=96, per_device_train_batch_size=2,
                max_steps=5, learning_rate=3e-3, lr_scheduler_type="constant", logging_steps=1, seed=0,
                report_to="none", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)


@dataclass
class ScriptArguments:
    model: str | None = field(default=None, metadata={"help": "local checkpoint dir (default: a tiny random Llama)"})
    compare_cpu: bool = field(default=True, metadata={"help": "also run on CPU (subprocess) and compare losses"})
    loss_rtol: float | None = field(default=None, metadata={
        "help": "relative tolerance of the loss comparison (default: 1e-5 in fp32, 5e-3 under bf16 autocast)"})
    result_json: str | None = field(default=None, metadata={"help": "write losses and shapes here"})
    num_texts: int | None = field(default=None, metadata={"help": "dataset size (default: enough for max_steps)"})


def parse(argv=None):
    from transformers import HfArgumentParser
    from trl import SFTConfig

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--output_dir" not in argv:
        argv += ["--output_dir", tempfile.mkdtemp(prefix="sft-out-")]
    parser = HfArgumentParser((ScriptArguments, SFTConfig))
    parser.set_defaults(**DEFAULTS)
    return parser.parse_args_into_dataclasses(args=argv)


def train(script: ScriptArguments, config, callbacks=None, resume_from_checkpoint=None):
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    path = script.model or hf_common.build_causal_lm(initializer_range=0.02)  # Llama's standard init
    tokenizer = AutoTokenizer.from_pretrained(path)
    # enough text for max_steps full blocks of max_length tokens (about 4 characters per token here)
    tokens_needed = config.max_length * config.per_device_train_batch_size * config.gradient_accumulation_steps \
        * config.max_steps * max(1, int(os.environ.get("WORLD_SIZE", "1")))
    dataset = hf_common.text_dataset(n=script.num_texts or max(32, math.ceil(tokens_needed / 40) + 16), seed=0)

    if config.model_init_kwargs is None and config.device.type == "neuron" and config.world_size == 1:
        # One process, one NeuronCore. TRL's default device_map="auto" would spread this process's model over
        # every visible core (an instance has 2-128), as it spreads it over the GPUs of a multi-GPU host, and
        # TRL 1.16's loss then mixes devices. Same effect: NEURON_RT_VISIBLE_CORES=0 (like CUDA_VISIBLE_DEVICES=0).
        config.model_init_kwargs = {"device_map": str(config.device)}
    trainer = SFTTrainer(model=path, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)

    shapes = []  # what the model actually sees: device, shape, and a checksum of the tokens

    def record(module, args, kwargs):
        ids = kwargs["input_ids"]
        shapes.append((str(ids.device), list(ids.shape), int(ids.sum())))

    trainer.model.register_forward_pre_hook(record, with_kwargs=True)
    out = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    result = dict(device=str(config.device), bf16=config.bf16, losses=losses, train_loss=out.training_loss,
                  shapes=shapes, pad_to_multiple_of=config.pad_to_multiple_of, torch_compile=config.torch_compile,
                  torch_compile_backend=config.torch_compile_backend,
                  param_devices=sorted({str(p.device) for p in trainer.model.parameters()}))
    return trainer, result


def cpu_reference(argv: list[str], bf16: bool, timeout: int = 900) -> dict:
    """The same command with --use_cpu true in a fresh process (a process has one accelerator state), with the
    precision the neuron run resolved (TRL turns bf16 autocast on by default on an accelerator, not on CPU)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--use_cpu", "true", "--torch_compile", "false",
           "--bf16", str(bool(bf16)).lower(), "--compare_cpu", "false", "--result_json", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"CPU reference failed:\n{r.stderr[-4000:]}")
    with open(out) as f:
        return json.load(f)


def compare(result: dict, ref: dict, rtol: float) -> float:
    assert len(result["losses"]) == len(ref["losses"]) > 0, (result["losses"], ref["losses"])
    worst = max(abs(a - b) / abs(b) for a, b in zip(result["losses"], ref["losses"]))
    assert worst <= rtol, f"losses differ from CPU (rel {worst:.2e} > {rtol}):\n{result['losses']}\n{ref['losses']}"
    return worst


def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    script, config = parse(argv)
    trainer, result = train(script, config)
    print(f"[sft] device={result['device']} params on {result['param_devices']} "
          f"pad_to_multiple_of={result['pad_to_multiple_of']} compile={result['torch_compile']}"
          f"({result['torch_compile_backend']}) batch shapes={sorted({tuple(s) for _, s, *_ in result['shapes']})}")
    print(f"[sft] losses {['%.5f' % x for x in result['losses']]}")
    if config.device.type == "neuron":
        assert config.pad_to_multiple_of == 128, config.pad_to_multiple_of
        # TRL pads every batch to a multiple of 128 on neuron (one compiled shape); wrapped packing: all full
        assert all(dev.startswith("neuron") and shape[1] % 128 == 0 for dev, shape, *_ in result["shapes"]), \
            result["shapes"]
        assert len({tuple(shape) for _, shape, *_ in result["shapes"]}) == 1, "batch shapes are not static"
        if config.torch_compile:
            assert config.torch_compile_backend == "neuron", config.torch_compile_backend
    if script.compare_cpu and config.device.type != "cpu":
        ref = cpu_reference(argv, bf16=config.bf16)
        rtol = script.loss_rtol or (5e-3 if config.bf16 else 1e-5)
        result["cpu_losses"] = ref["losses"]
        result["max_rel_diff"] = compare(result, ref, rtol)
        print(f"[sft] CPU losses {['%.5f' % x for x in ref['losses']]}; max rel diff {result['max_rel_diff']:.2e}")
    if script.result_json:
        with open(script.result_json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
