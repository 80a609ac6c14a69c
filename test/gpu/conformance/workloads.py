#!/usr/bin/env python3
"""The conformance workloads: ordinary PyTorch scripts that know nothing of GPU Memory Lens, each printing the truth
it measured from PyTorch itself as one line `TRUTH {json}` (and writing it to $CONFORMANCE_TRUTH when set).

    python3 test/gpu/conformance/workloads.py NAME [--scale smoke|full]

The truth (what every analysis of a capture of the same run must agree with, test/unit/conformance.test.mjs):
- `step_ends`: right after each Optimizer.step() (where the tool ends a step): torch.cuda.memory_allocated(),
  memory_reserved(), and the bytes of the storages of each kind, every storage once (tied weights, a gradient
  that is a view of another's storage): `parameter` (the modules' parameters), `buffer` (their buffers, not
  parameters), `gradient` (the parameters' .grad), `optimizer_state` (the optimizer's CUDA state tensors);
- `kept_saved` (retained-graph workloads): at each step end, the bytes of the storages autograd saved for the
  graphs the loop keeps, from a saved_tensors_hooks pack hook (not the graph walk the tool's keeper uses), the
  parameters and the kept tensors' own storages left out;
- `generate` (inference): the weights (parameters and buffers) and the KV cache's storages after generate();
- at the end: max_memory_allocated(), max_memory_reserved(), memory_reserved(), the allocator's settings and
  backend, and PyTorch's own counters (num_alloc_retries, num_device_alloc).
Each workload is small on purpose: its captures are fixtures of the CPU suite.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "200")), exit=True)  # a stall comes back as a stack
import argparse
import json
import random
import sys
import time

import torch

SCALE = "full"


def n(smoke, full):
    return smoke if SCALE == "smoke" else full


def storages(tensors, skip=()):
    """data_ptr → nbytes of the CUDA storages of tensors, each once, leaving out the addresses in skip."""
    out = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_cuda:
            s = t.untyped_storage()
            if s.data_ptr() not in skip and s.nbytes():
                out[s.data_ptr()] = s.nbytes()
    return out


def state_tensors(opt):
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                yield v


class Truth:
    def __init__(self, name):
        self.out = {"workload": name, "scale": SCALE, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                    "step_ends": []}

    def step_end(self, model, opt=None, extra=None):
        params = storages(model.parameters())
        buffers = storages(model.buffers(), skip=params)
        grads = storages((p.grad for p in model.parameters()), skip=params)
        state = storages(state_tensors(opt), skip={**params, **grads}) if opt is not None else {}
        row = {"t_us": time.time_ns() // 1000,  # wall clock, as a capture's times are (its header's clock anchors)
               "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
               "parameter": sum(params.values()), "buffer": sum(buffers.values()), "gradient": sum(grads.values()),
               "optimizer_state": sum(state.values())}
        if extra:
            row.update(extra)
        self.out["step_ends"].append(row)

    def finish(self, **more):
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        self.out.update(more)
        self.out.update({
            "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
            "reserved_end": torch.cuda.memory_reserved(), "allocated_end": torch.cuda.memory_allocated(),
            "backend": torch.cuda.memory.get_allocator_backend(),
            "num_alloc_retries": stats.get("num_alloc_retries"), "num_device_alloc": stats.get("num_device_alloc"),
            "torch": torch.__version__,
        })
        try:
            self.out["allocator_settings"] = torch.cuda.memory._snapshot().get("allocator_settings")
        except Exception as e:  # noqa: BLE001  (a pluggable allocator's snapshot)
            self.out["allocator_settings"] = repr(e)[:200]
        line = json.dumps(self.out)
        path = os.environ.get("CONFORMANCE_TRUTH")
        if path:
            with open(path, "w") as f:
                f.write(line + "\n")
        print("TRUTH " + line, flush=True)


def train(name, model, opt, batches, loss_of, truth=None, accumulate=1, clip=None, autocast=True, keep=None):
    """The plain loop: zero_grad(set_to_none=True), forward (bf16 autocast), backward, step; `accumulate`
    micro-batches a step; clip_grad_norm_ when asked; keep: a list the loop appends its loss to after
    backward(retain_graph=True) (the retained-graph leak)."""
    truth = truth or Truth(name)
    it = iter(batches)
    for step in range(10 ** 9):
        try:
            micro = [next(it) for _ in range(accumulate)]
        except StopIteration:
            break
        opt.zero_grad(set_to_none=True)
        for b in micro:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = loss_of(model, b) / accumulate
            if keep is not None:
                loss.backward(retain_graph=True)
                keep.append(loss)
            else:
                loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        truth.step_end(model, opt, truth_extra(keep))
    return truth


# --- retained graphs: what the kept graphs save, from a pack hook ---------------------------------------------

SAVED = {}  # storage data_ptr → nbytes, every storage a forward saved that is no parameter
PARAMS = set()


def pack(t):
    if isinstance(t, torch.Tensor) and t.is_cuda:
        s = t.untyped_storage()
        if s.data_ptr() not in PARAMS and s.nbytes():
            SAVED[s.data_ptr()] = s.nbytes()
    return t


def truth_extra(keep):
    if keep is None:
        return None
    own = storages(keep)
    return {"kept_saved": sum(v for k, v in SAVED.items() if k not in own), "kept_tensors": len(keep)}


HISTORY = []  # what the retained-graph loops keep: a module global, as a script's `history = []`, alive to the exit


def retained(name, model, batches, loss_of, lr=0.01):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    PARAMS.update(storages(model.parameters()))
    PARAMS.update(storages(model.buffers()))  # buffers are weights, not what the graphs keep
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        return train(name, model, opt, batches, loss_of, keep=HISTORY)


# --- the workloads ----------------------------------------------------------------------------------------------

def lm_varlen():
    """GPT-2 with the sequence length varying 128…1024 at a fixed number of tokens a batch: the fragmenting LM."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_positions=1024, n_layer=n(2, 12))).cuda()  # full: GPT-2 small
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(3)
    tokens = n(4096, 8192)

    def batches():
        for _ in range(n(6, 30)):
            seq = rng.choice(range(128, 1025, 64))
            ids = torch.randint(0, 50257, (max(1, tokens // seq), seq), device="cuda")
            yield ids

    return train("lm_varlen", model, opt, batches(), lambda m, ids: m(input_ids=ids, labels=ids).loss).finish()


def convnet_benchmark():
    """ConvNeXt-T with cudnn.benchmark, two input sizes in turn (each new shape is benchmarked anew)."""
    import torchvision

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.convnext_tiny(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sizes = [128, 160]

    def batches():
        for k in range(n(4, 8)):
            s = sizes[k % 2]
            yield torch.randn(n(8, 32), 3, s, s, device="cuda"), torch.randint(0, 100, (n(8, 32),), device="cuda")

    loss = torch.nn.functional.cross_entropy
    return train("convnet_benchmark", model, opt, batches(), lambda m, b: loss(m(b[0]), b[1])).finish(
        cudnn_benchmark=torch.backends.cudnn.benchmark)


def compile_graphs():
    """torch.compile(mode="reduce-overhead") inference of a small transformer encoder, two batch shapes: CUDA graph
    trees record each shape into their private pool and replay it."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2).cuda().eval()
    fast = torch.compile(model, mode="reduce-overhead")
    outs = []
    with torch.no_grad():
        for k in range(n(6, 12)):
            x = torch.randn((8, 16)[k % 2], 128, 256, device="cuda")
            y = fast(x)
            outs.append(float(y.float().mean()))
    truth = Truth("compile_graphs")
    truth.finish(outputs=outs[-2:])


def mempool():
    """An MLP whose forward allocates in a torch.cuda.MemPool, its backward and optimizer in the default pools, with
    the batch varying; the pool is released at the end."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    pool = torch.cuda.MemPool()
    truth = Truth("mempool")
    for k in range(n(4, 10)):
        x = torch.randn(256 * (1 + k % 3), 1024, device="cuda")
        opt.zero_grad(set_to_none=True)
        with torch.cuda.use_mem_pool(pool):
            loss = model(x).square().mean()
        loss.backward()
        opt.step()
        truth.step_end(model, opt)
    del loss
    truth.finish(pool_id=list(pool.id))


def expandable():
    """Swin-T trained with the batch varying 8/16/24, under whatever PYTORCH_CUDA_ALLOC_CONF the caller gives
    (the conformance runs give expandable_segments:True)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.swin_t(num_classes=100).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def batches():
        for k in range(n(4, 9)):
            b = (8, 16, 24)[k % 3] // (2 if SCALE == "smoke" else 1)
            yield torch.randn(b, 3, 224, 224, device="cuda"), torch.randint(0, 100, (b,), device="cuda")

    loss = torch.nn.functional.cross_entropy
    return train("expandable", model, opt, batches(), lambda m, b: loss(m(b[0]), b[1])).finish()


def alloc_conf():
    """T5 (encoder-decoder, tied embeddings) with source and target lengths varying, AdamW and gradient clipping,
    under the caller's PYTORCH_CUDA_ALLOC_CONF (the conformance runs give max_split_size_mb and
    roundup_power2_divisions)."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=8000, d_model=384, d_kv=48, d_ff=1536, num_layers=n(2, 4), num_decoder_layers=n(2, 4),
                   num_heads=8, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(5)

    def batches():
        for _ in range(n(5, 14)):
            src, tgt = rng.choice(range(64, 513, 32)), rng.choice(range(32, 257, 32))
            b = max(1, 16384 // src)
            yield (torch.randint(0, 8000, (b, src), device="cuda"), torch.randint(0, 8000, (b, tgt), device="cuda"))

    return train("alloc_conf", model, opt, batches(), lambda m, b: m(input_ids=b[0], labels=b[1]).loss,
                 clip=1.0).finish()


def gc_threshold():
    """Buffers of varying sizes under a memory fraction, with garbage_collection_threshold in the caller's
    PYTORCH_CUDA_ALLOC_CONF: PyTorch frees cached blocks as usage nears the fraction."""
    torch.cuda.set_per_process_memory_fraction(0.02)
    rng = random.Random(7)
    live = []
    for _ in range(n(60, 200)):
        live.append(torch.empty(rng.choice((24, 40, 72, 136)) << 20, dtype=torch.uint8, device="cuda"))
        if len(live) > 12:
            live.pop(rng.randrange(len(live)))
    del live
    Truth("gc_threshold").finish()


def llama_accumulate():
    """A Llama-style decoder (RoPE, RMSNorm, SwiGLU, grouped-query attention, tied embeddings) trained with two
    micro-batches a step, gradient clipping and AdamW."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16000, hidden_size=512, intermediate_size=1376, num_hidden_layers=n(2, 6),
                      num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def batches():
        for _ in range(n(4, 12)):
            yield torch.randint(0, 16000, (8, 256), device="cuda")

    return train("llama_accumulate", model, opt, batches(), lambda m, ids: m(input_ids=ids, labels=ids).loss,
                 accumulate=2, clip=1.0).finish()


def retained_regnet():
    """RegNetY (squeeze-excite, BatchNorm, in-place ReLU): the loop keeps each loss after backward(retain_graph=True)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.regnet_y_400mf(num_classes=100).cuda()
    loss = torch.nn.functional.cross_entropy
    data = ((torch.randn(16, 3, 160, 160, device="cuda"), torch.randint(0, 100, (16,), device="cuda"))
            for _ in range(n(4, 8)))  # made a step at a time: only the kept graphs keep a batch
    return retained("retained_regnet", model, data, lambda m, b: loss(m(b[0]), b[1])).finish()


def retained_densenet():
    """DenseNet-121 (BatchNorm, in-place ReLU, concatenation): the same retained-graph loop."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.densenet121(num_classes=100).cuda()
    loss = torch.nn.functional.cross_entropy
    data = ((torch.randn(8, 3, 128, 128, device="cuda"), torch.randint(0, 100, (8,), device="cuda"))
            for _ in range(n(4, 8)))
    return retained("retained_densenet", model, data, lambda m, b: loss(m(b[0]), b[1])).finish()


def retained_opt():
    """OPT (attention, learned positions, ReLU MLP): the same retained-graph loop on a language model."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    cfg = OPTConfig(vocab_size=8000, hidden_size=384, ffn_dim=1536, num_hidden_layers=n(2, 4), num_attention_heads=6,
                    max_position_embeddings=512, word_embed_proj_dim=384)
    model = OPTForCausalLM(cfg).cuda()
    data = (torch.randint(0, 8000, (8, 256), device="cuda") for _ in range(n(4, 8)))
    return retained("retained_opt", model, data, lambda m, ids: m(input_ids=ids, labels=ids).loss, lr=1e-4).finish()


def generate():
    """Inference with no optimizer: a Mistral-style model's generate() with its DynamicCache, in bf16."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=16000, hidden_size=768, intermediate_size=2048, num_hidden_layers=n(2, 8),
                        num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048)
    model = MistralForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 16000, (8, 128), device="cuda")
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n(16, 96), do_sample=False, return_dict_in_generate=True,
                             pad_token_id=0)
    cache = out.past_key_values
    tensors = []
    for layer in getattr(cache, "layers", []) or []:
        tensors += [getattr(layer, "keys", None), getattr(layer, "values", None)]
    for attr in ("key_cache", "value_cache"):
        tensors += list(getattr(cache, attr, []) or [])
    params = storages(model.parameters())
    weights = {**params, **storages(model.buffers(), skip=params)}
    kv = storages(tensors, skip=weights)
    Truth("generate").finish(generate={"t_us": time.time_ns() // 1000, "allocated": torch.cuda.memory_allocated(),
                                       "weights": sum(weights.values()), "parameters": sum(params.values()),
                                       "kv_cache": sum(kv.values()), "kv_tensors": len(kv),
                                       "cache_type": type(cache).__name__, "sequences": list(out.sequences.shape)})


def zero_size():
    """What a zero-size tensor counts, and PyTorch's own stats consistency around it."""
    base = torch.cuda.memory_allocated()
    x = torch.empty(0, device="cuda")
    y = torch.empty((0, 128), device="cuda")
    with_zero = torch.cuda.memory_allocated()
    z = torch.empty(1000, device="cuda")
    one = torch.cuda.memory_allocated()
    del x, y, z
    stats = torch.cuda.memory_stats()
    Truth("zero_size").finish(zero={"base": base, "with_zero": with_zero, "with_1000_floats": one,
                                    "active_equals_allocated": stats["active_bytes.all.current"] ==
                                    stats["allocated_bytes.all.current"]})


WORKLOADS = {f.__name__: f for f in (lm_varlen, convnet_benchmark, compile_graphs, mempool, expandable, alloc_conf,
                                     gc_threshold, llama_accumulate, retained_regnet, retained_densenet, retained_opt,
                                     generate, zero_size)}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(WORKLOADS))
    ap.add_argument("--scale", choices=("smoke", "full"), default="full")
    a = ap.parse_args()
    SCALE = a.scale
    WORKLOADS[a.name]()
    sys.stdout.flush()
