"""Compatibility matrix: every causal-LM architecture in Transformers on neuron, eager and compiled.

  architectures.py     which architectures (Transformers' causal-LM mapping) and their tiny configs
  worker.py            one architecture's checks, CPU vs neuron, in its own process
  runner.py            one subprocess per architecture, timeouts, N at a time
  categories.py        failure categories and how an error is sorted into one (its type first)
  same_failure.py      when a CPU failure is the same failure as neuron's (what lets a compiled failure leave the count)
  compile_counters.py  graphs / recompiles / graph breaks around a compiled step
  cpu_reference.py     Inductor on CPU under the neuron backend's rules: what a compiled failure is judged against
  report.py            verdicts, `compatible: N/M (P%)`, merging runs, JSON and Markdown
  provenance.py        the commit, dates, versions and wall time of a report (its header), and the code it measures
  paths.py             this machine's paths out of reports
  charts.py            the Markdown report's charts (Mermaid)
  progress.py          the live progress line: bar, running items, elapsed, estimate of what is left
  cli.py               `torchneuron compat`
"""

from .runner import run_matrix  # noqa: F401
