"""The ground floor every layer may import: settings (`config`), run-once guards (`once`), progress reporting
(`progress`), interrupt handling (`interrupts`) and the per-process thread budget (`threads`). Imports nothing
else of earmark's."""
