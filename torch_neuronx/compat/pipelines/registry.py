"""Which Diffusers pipelines the matrix knows: every pipeline class the installed Diffusers exports.

A class with a recipe (builders.py) is run; one without is listed with the reason it is not run here
(no tiny builder yet, a tokenizer that cannot be built offline, a package that is not installed), so the
report always accounts for every pipeline class of the installed version.
"""

from __future__ import annotations

import functools

# Not pipelines one runs: bases, the AutoPipeline dispatchers, and backends that are not PyTorch.
_NOT_PIPELINES = ("Onnx", "Flax", "OpenVINO")  # in the name: not PyTorch
_BASES = ("DiffusionPipeline", "ModularPipeline")

# Packages a few pipelines need that the `hf` extra leaves out, so the default install stays light (note_seq alone
# pulls librosa, IPython and bokeh): pyproject.toml's `diffusers-matrix` extra installs them. By Diffusers' backend
# names: sentencepiece (Kolors' ChatGLM tokenizer), opencv (ConsisID), librosa (Audio Diffusion), note_seq
# (Spectrogram Diffusion).
MATRIX_EXTRA = "diffusers-matrix"
MATRIX_EXTRA_BACKENDS = ("sentencepiece", "opencv", "librosa", "note_seq")

_IMPORT_ERRORS: dict[str, Exception] = {}


@functools.lru_cache(maxsize=None)
def pipeline_classes() -> dict[str, type]:
    """name -> class, for every pipeline class `diffusers` exports (torch ones), sorted by name."""
    import diffusers
    from diffusers import DiffusionPipeline
    structure = getattr(diffusers, "_import_structure", {})
    # every exported name, also those exported as placeholders when an optional package is missing
    names = sorted({n for names in structure.values() for n in names}) or dir(diffusers)
    out = {}
    for name in names:
        if not name.endswith("Pipeline") or name in _BASES or name.startswith("AutoPipeline") \
                or any(k in name for k in _NOT_PIPELINES):
            continue
        try:
            cls = getattr(diffusers, name)
        except Exception as e:  # noqa: BLE001 - a class whose module fails to import still gets a row
            _IMPORT_ERRORS[name] = e
            continue
        backends = getattr(cls, "_backends", None)
        if type(cls).__name__ == "DummyObject" and backends:
            _IMPORT_ERRORS[name] = ImportError(missing_backends_reason(name, _missing(backends)))
        elif isinstance(cls, type) and issubclass(cls, DiffusionPipeline):
            out[name] = cls
    return out


def _missing(backends: list[str]) -> list[str]:
    """The backends (Diffusers' names) that are not installed, by Diffusers' own availability checks."""
    from diffusers.utils.import_utils import BACKENDS_MAPPING
    return [b for b in backends if b in BACKENDS_MAPPING and not BACKENDS_MAPPING[b][0]()] or list(backends)


def missing_backends_reason(name: str, missing: list[str]) -> str:
    """Why `name` does not import, and the install that fixes it when the matrix extra has every missing package."""
    reason = f"{name} needs {', '.join(missing)} (not installed)"
    if all(b in MATRIX_EXTRA_BACKENDS for b in missing):
        reason += f": `pip install -e .[{MATRIX_EXTRA}]` installs it"
    return reason


def import_errors() -> dict[str, Exception]:
    """name -> error, for the pipeline classes Diffusers exports that do not import here (a missing package)."""
    pipeline_classes()
    return dict(_IMPORT_ERRORS)


def import_error(name: str) -> Exception:
    """Why `name` is not among the pipeline classes (the error importing it, or: not a pipeline class here)."""
    pipeline_classes()
    return _IMPORT_ERRORS.get(name) or KeyError(f"{name} is not a pipeline class of the installed Diffusers")


def family(name: str) -> str:
    """The Diffusers subpackage a pipeline lives in (stable_diffusion, flux, ...): the report groups by it."""
    cls = pipeline_classes().get(name)
    if cls is None:
        return "other"
    parts = cls.__module__.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "pipelines" else parts[-1]


def not_runnable() -> dict[str, tuple[str, str]]:
    """name -> (category, reason) for the pipeline classes the matrix does not run here."""
    from ..categories import NO_BUILDER
    from .builders import RECIPES, UNBUILDABLE
    from ..categories import NEEDS_PACKAGE, first_line
    out = {}
    for name in pipeline_classes():
        if name in RECIPES:
            continue
        out[name] = UNBUILDABLE.get(name, (NO_BUILDER, "no recipe of tiny components in compat/pipelines/builders.py"))
    for name, e in import_errors().items():  # exported, but it does not import here
        out[name] = (NEEDS_PACKAGE, f"importing it: {first_line(e)}")
    return dict(sorted(out.items()))


def runnable() -> dict[str, str]:
    """name -> family, for the pipeline classes with a recipe."""
    from .builders import RECIPES
    return {n: family(n) for n in pipeline_classes() if n in RECIPES}
