"""The Diffusers compatibility matrix: every pipeline class of the installed Diffusers that can be built from
tiny components here, on CPU and on neuron, eager and with its denoiser compiled (`torchneuron compat --suite
diffusers`). The runner, categories, verdicts, progress line and JSON are compat/'s; this package adds what is
Diffusers' own:

  registry.py    every pipeline class Diffusers exports; which have a recipe, and why the others are not run
  components.py  tiny random components (tokenizers, text encoders, VAEs, UNets, transformers, schedulers)
  builders.py    a recipe per pipeline class: its components and call arguments
  inputs.py      the common call inputs (prompt, steps, seeded generator, image, mask) and the output as an array
  worker.py      one pipeline's checks in its own process
  report.py      the Markdown report (docs/compat-diffusers.md)
"""
