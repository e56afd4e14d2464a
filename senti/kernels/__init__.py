"""senti's CPU training kernels, a wing of their own: the C source (kernels.c) and how it is compiled (build.py), its
binding and PyLayers (native.py), the layers switched to them (cpu_kernels.py) and bfloat16 Linears through oneDNN
(bf16.py). Each C kernel names the gap in Paddle's CPU build it covers, so it can go when Paddle closes that gap
(docs/results/training-speed.md measures each)."""
