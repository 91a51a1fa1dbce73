"""Training: the config's checks (`checks`), the stages composed from the config
(`pipeline`), the optimiser (`optim`), each process's share of every batch and its
prefetch (`batches`), the loop (`loop.train_and_evaluate`), its evaluations, progress,
model selection and metric files (`evaluation`, `monitor`, `selection`,
`metric_writers`), and starting from another run's parameters (`warm_start`).
"""
