"""Facts of the installed PyTorch and transformers the conformance workloads build on, printed as one JSON line:
the allocator settings PyTorch reports for a PYTORCH_CUDA_ALLOC_CONF, what a generate() KV cache is made of, which
torchvision and transformers models exist here, and what a zero-size tensor counts in memory_allocated().

    python3 test/gpu/conformance/probe_torch.py
"""
import faulthandler

faulthandler.dump_traceback_later(100, exit=True)  # a stall comes back as a stack
import json
import os

import torch

out = {"torch": torch.__version__}
x = torch.empty(0, device="cuda")
out["zero_size_allocated"] = torch.cuda.memory_allocated()
del x
snap = torch.cuda.memory._snapshot()
out["snapshot_keys"] = sorted(snap.keys())
out["allocator_settings"] = snap.get("allocator_settings")
out["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
try:
    import torchvision

    out["torchvision"] = torchvision.__version__
    out["tv_models"] = sorted(torchvision.models.list_models(module=torchvision.models))
except Exception as e:  # noqa: BLE001
    out["torchvision"] = repr(e)
try:
    import transformers

    out["transformers"] = transformers.__version__
    from transformers import LlamaConfig, LlamaForCausalLM

    m = LlamaForCausalLM(LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=1000)).cuda().eval()
    ids = torch.randint(0, 1000, (2, 8), device="cuda")
    with torch.no_grad():
        g = m.generate(ids, max_new_tokens=4, do_sample=False, return_dict_in_generate=True, pad_token_id=0)
    pkv = g.past_key_values
    out["cache_type"] = type(pkv).__module__ + "." + type(pkv).__qualname__
    out["cache_attrs"] = sorted(a for a in vars(pkv))
    layers = getattr(pkv, "layers", None)
    if layers:
        out["cache_layer_type"] = type(layers[0]).__module__ + "." + type(layers[0]).__qualname__
        out["cache_layer_attrs"] = sorted(vars(layers[0]))
    import inspect

    upd = getattr(type(layers[0]) if layers else type(pkv), "update")
    out["cache_update_file"] = inspect.getsourcefile(upd)
    for name in ("T5ForConditionalGeneration", "BartForConditionalGeneration", "OPTForCausalLM", "MistralForCausalLM",
                 "Qwen2ForCausalLM", "DistilBertForMaskedLM", "RobertaForMaskedLM", "WhisperForConditionalGeneration"):
        out.setdefault("tf_models", {})[name] = hasattr(transformers, name)
except Exception as e:  # noqa: BLE001
    import traceback

    out["transformers_error"] = traceback.format_exc()[-1500:]
print("PROBE " + json.dumps(out))
