# Builds the C++ core (torch_neuronx._C) against the installed torch.
import glob
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # importing torch here must not load a plugin

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

sources = sorted(glob.glob("csrc/*.cpp") + glob.glob("csrc/**/*.cpp", recursive=True))
sources = sorted(set(sources))

setup(
    ext_modules=[
        CppExtension(
            "torch_neuronx._C",
            sources,
            include_dirs=[os.path.abspath("csrc")],
            extra_compile_args=["-O2", "-g0", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
