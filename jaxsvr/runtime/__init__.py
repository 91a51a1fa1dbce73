"""What a process runs on: the device mesh and shardings (`parallel`), joining
`jax.distributed` (`distributed`), matmul precision (`precision`), process-wide settings
of the evaluation and training commands (`process_tuning`; JAX's random-bit hash unrolled
on the CPU, `threefry`), the run folder and its atomic writer (`workdir`), one-line
errors and exit code 2 for the commands (`cli`).
"""
