"""A device-backend plugin that initialises CUDA while torch imports (the too-late case)."""
import torch.cuda

torch.cuda.current_device()  # PLUGIN_INITS_CUDA_HERE
