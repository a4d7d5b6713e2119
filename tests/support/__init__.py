"""Test and benchmark support, not installed with the product: random-weight stand-ins of the paper profile's
models (`random_weights`, `nisqa_checkpoint`, `whisper_export`), a corpus of bad inputs (`bad_input`), and the
measuring machinery the benchmark scripts and their smoke tests share (`kill_points`, `throughput`,
`worker_cpu`, `devset`, `date_loops`). Tests import it as `support` (tests/ is on pytest's path); a benchmark
script puts tests/ on its path first (benchmarks/README.md)."""
