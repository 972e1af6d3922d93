"""Compatibility matrix: every causal-LM architecture in Transformers on neuron, eager and compiled.

  architectures.py     which architectures (Transformers' causal-LM mapping) and their tiny configs
  worker.py            one architecture's checks, CPU vs neuron, in its own process
  runner.py            one subprocess per architecture, timeouts, N at a time
  categories.py        failure categories and how an error is sorted into one
  compile_counters.py  graphs / recompiles / graph breaks around a compiled step
  cpu_reference.py     Inductor on CPU under the neuron backend's rules: what a compiled failure is judged against
  report.py            verdicts, `compatible: N/M (P%)`, JSON and Markdown
  charts.py            the Markdown report's charts (Mermaid)
  progress.py          the live progress line: bar, running items, elapsed, estimate of what is left
  cli.py               `torchneuron compat`
"""

from .runner import run_matrix  # noqa: F401
