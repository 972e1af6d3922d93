"""Target of torch's `torch.backends` entry point: `import torch` loads the plugin through it.

When the user imports torch_neuronx first, torch's import runs this while the
package is still initialising; the outer import finishes the job.
"""


def load() -> None:
    import torch_neuronx  # noqa: F401
