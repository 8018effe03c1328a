"""The runtime: the process's settings the maths runs under, never the maths: BLAS threads (`blas`), the row
threads of the element-wise work (`row_threads`) and batches run side by side (`side_by_side`). The lowest layer:
it imports nothing of numbert, and every layer above may import it."""
