"""PyTorch twins for benchmarks/train_lm.py --vs-torch (PyTorch is optional: this file is only
imported when it is installed; nothing in helpers/ or notebooks/ imports it).

* `Ours`: notebook 09's DecoderOnly (either set of blocks) in PyTorch, weights on the right
  (x @ W) as in NumPy, built from a NumPy model's parameters, so both start from the same weights.
* `NanoGPT`: nanoGPT's model (GPT-2 blocks: learned positions, pre-norm LayerNorm without biases,
  GELU, no biases anywhere, tied output), written out here from its description; its initial
  weights come from PyTorch's generator with nanoGPT's initialisation (normal 0.02, the residual
  projections 0.02 / sqrt(2 n_layer)).
`compare` trains both on the same batches with the recipe's AdamW and schedule, and reports them
next to the NumPy run.
"""

from __future__ import annotations

import math
import time

import numpy as np

from helpers.lm import cosine_schedule, windows


def _modules(torch):
    nn, F = torch.nn, torch.nn.functional

    class Ours(nn.Module):
        def __init__(self, numpy_model):
            super().__init__()
            c = numpy_model.config
            self.c = c
            self.params = nn.ParameterDict({k.replace(".", "__"): nn.Parameter(torch.tensor(v))
                                            for k, v in numpy_model.parameters().items()})
            d_k = c.d_model // c.n_heads
            w = 1.0 / 10000.0 ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
            angles = torch.arange(c.max_len, dtype=torch.float64)[:, None] * w
            self.turn = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
            pe = torch.zeros(c.max_len, c.d_model, dtype=torch.float64)
            full = torch.arange(c.max_len, dtype=torch.float64)[:, None] * \
                (1.0 / 10000.0 ** (torch.arange(0, c.d_model, 2, dtype=torch.float64) / c.d_model))
            pe[:, 0::2], pe[:, 1::2] = torch.sin(full), torch.cos(full)
            self.pe = pe.float()

        def p(self, name):
            return self.params[name.replace(".", "__")]

        def norm(self, x, prefix):
            if self.c.norm == "rms":
                return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.p(
                    prefix + ".gamma")
            return F.layer_norm(x, (x.shape[-1],), self.p(prefix + ".gamma"),
                                self.p(prefix + ".beta"), 1e-5)

        def rope(self, x):  # x (B, h, T, d_k): pairs as complex numbers, as llama does
            T = x.shape[-2]
            z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            return torch.view_as_real(z * self.turn[:T]).flatten(-2)

        def attention(self, x, prefix):
            B, T, d = x.shape
            h = self.c.n_heads
            heads = [(x @ self.p(f"{prefix}.W_{n}") + self.p(f"{prefix}.b_{n}"))
                     .view(B, T, -1, d // h).transpose(1, 2) for n in "qkv"]
            q, k, v = heads
            if self.c.position == "rope":
                q, k = self.rope(q), self.rope(k)
            group = h // k.shape[1]
            if group > 1:
                k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, d)
            return y @ self.p(f"{prefix}.W_o") + self.p(f"{prefix}.b_o")

        def ffn(self, x, prefix):
            if self.c.ffn == "swiglu":
                return (F.silu(x @ self.p(prefix + ".W_1")) * (x @ self.p(prefix + ".V"))) @ \
                    self.p(prefix + ".W_2")
            hidden = F.relu(x @ self.p(prefix + ".W_1") + self.p(prefix + ".b_1"))
            return hidden @ self.p(prefix + ".W_2") + self.p(prefix + ".b_2")

        def forward(self, idx):
            c = self.c
            x = self.p("token_embed")[idx] * math.sqrt(c.d_model)
            if c.position == "sinusoidal":
                x = x + self.pe[:idx.shape[1]]
            for i in range(c.n_layers):
                b = f"decoder.layers.{i}"
                for sub, fn in (("1", self.attention), ("2", self.ffn)):
                    part = f"{b}.self_attn" if sub == "1" else f"{b}.ffn"
                    if c.norm_first:
                        x = x + fn(self.norm(x, f"{b}.norm{sub}"), part)
                    else:
                        x = self.norm(x + fn(x, part), f"{b}.norm{sub}")
            if c.norm_first:
                x = self.norm(x, "decoder.norm")
            return x @ self.p("token_embed").T

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d,
                                                                                bias=False)
            self.h = h

        def forward(self, x):
            B, T, d = x.shape
            q, k, v = (t.view(B, T, self.h, d // self.h).transpose(1, 2)
                       for t in self.c_attn(self.ln_1(x)).split(d, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class NanoGPT(nn.Module):
        def __init__(self, vocab, context, d, h, n_layers):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
            self.blocks = nn.ModuleList(Block(d, h) for _ in range(n_layers))
            self.ln_f = nn.LayerNorm(d, bias=False)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as nanoGPT
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(
                        ("c_proj.weight", "mlp_proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return Ours, NanoGPT


def train_torch(torch, model, recipe, train_ids, val_ids, seed=0):
    """The NumPy run's loop in PyTorch: the same batches, schedule, AdamW, clipping, estimates."""
    F = torch.nn.functional
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=recipe.peak,
                            betas=(0.9, recipe.beta2), eps=1e-8)
    rate = cosine_schedule(recipe.peak, recipe.warmup, recipe.steps, recipe.floor)
    batch_rng, eval_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    history = {"loss": [], "eval_step": [], "val": [], "train": [], "wall": []}
    start, spent = time.perf_counter(), 0.0

    def loss_of(x, y):
        logits = model(torch.from_numpy(x))
        targets = torch.from_numpy(y).reshape(-1)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)

    for step in range(1, recipe.steps + 1):
        x, y = windows(train_ids, batch_rng, recipe.batch, recipe.context)
        for group in opt.param_groups:
            group["lr"] = rate(step - 1)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        opt.step()
        history["loss"].append(loss.item())
        if step % recipe.eval_every == 0:
            t = time.perf_counter()
            with torch.no_grad():
                for name, data in (("val", val_ids), ("train", train_ids)):
                    history[name].append(float(np.mean(
                        [loss_of(*windows(data, eval_rng, recipe.batch, recipe.context)).item()
                         for _ in range(20)])))
            spent += time.perf_counter() - t
            history["eval_step"].append(step)
            history["wall"].append(time.perf_counter() - start)
    history["total"] = time.perf_counter() - start
    history["seconds"] = history["total"] - spent
    return history


def full_split_loss(torch, model, data, context, rows=256):
    n = (len(data) - 1) // context
    x = torch.from_numpy(data[:n * context].reshape(n, context))
    y = torch.from_numpy(data[1:n * context + 1].reshape(n, context))
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, rows):
            logits = model(x[i:i + rows])
            total += torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), y[i:i + rows].reshape(-1)).item() * len(
                    x[i:i + rows])
    return total / n


def compare(torch, recipe, blocks, config, train_ids, val_ids, numpy_run, report, summary):
    """Train the two PyTorch models, print them next to the NumPy run (numpy_run, a summary),
    and return {name: summary} for them; `blocks` names ours ("today's blocks")."""
    from helpers.lm import lm_model

    Ours, NanoGPT = _modules(torch)
    torch.manual_seed(1337)
    models = {f"PyTorch, {blocks} (the NumPy run's initial weights)":
              Ours(lm_model(config, 0)),
              "PyTorch, nanoGPT's model (GPT-2 blocks)":
              NanoGPT(config.vocab, recipe.context, config.d_model, config.n_heads,
                      config.n_layers)}
    runs = {}
    for name, model in models.items():
        history = train_torch(torch, model, recipe, train_ids, val_ids)
        parameters = sum(p.numel() for p in model.parameters())
        if hasattr(model, "wpe"):
            parameters -= model.wpe.weight.numel()  # nanoGPT counts without its positions
        full = full_split_loss(torch, model, val_ids, recipe.context)
        report(name, history, full, parameters)
        runs[name] = summary(history, full, parameters)
    print()
    for name, run in runs.items():
        print(f"NumPy / {name}: training-step time ratio "
              f"{numpy_run['seconds'] / run['seconds']:.2f}")
    return runs
