"""The build's one compiled part: the evaluation engine's ranking kernel, optional.

Everything else is in pyproject.toml. `pip install -e .` (or `pip install .`) compiles
jaxsvr/evaluation/rank_kernel.c with the system's C compiler into
jaxsvr/evaluation/_rank_kernel*.so; where it cannot (no compiler), the install goes on
without it and the engine runs its NumPy passes, with the same results
(jaxsvr/evaluation/compiled_kernel.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jaxsvr.evaluation._rank_kernel",
            ["jaxsvr/evaluation/rank_kernel.c"],
            # No fused multiply-add: the kernel's float64 terms round as NumPy's do.
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
