"""A llama-style decoder in PyTorch, written the way Meta's Llama 2 `llama/model.py` is written
(nn.Linear weights stored (out, in), the rotations as complex numbers `freqs_cis`, `repeat_kv`,
RMSNorm with a `weight`), to check notebook 09's llama preset (helpers.modern.llama_config)
number for number: tests/test_llama.py builds both from the same weights and compares the
logits in float64. PyTorch is optional (requirements-bench.txt): nothing in helpers/ or
notebooks/ imports this file.

It shares no code with helpers/: the layout of the weights, the pairing of RoPE's features, the
SwiGLU width rule and the causal mask are written out here again, from the Llama 2 release
(`ModelArgs`, `FeedForward`, `precompute_freqs_cis`, `apply_rotary_emb`, `repeat_kv`), with
the model-parallel layers replaced by nn.Linear and nn.Embedding, the key/value cache left out
(every position is computed at once) and the logits returned for every position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class ModelArgs:  # Llama 2's, without max_batch_size (no cache here)
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int | None = None
    vocab_size: int = 32000
    multiple_of: int = 256  # the SwiGLU width is rounded up to a multiple of this
    ffn_dim_multiplier: float | None = None
    norm_eps: float = 1e-5
    max_seq_len: int = 2048
    rope_theta: float = 10000.0


def hidden_width(args: ModelArgs) -> int:
    """Llama 2's FeedForward width: 2/3 of 4 dim, times ffn_dim_multiplier, rounded up."""
    hidden = int(2 * (4 * args.dim) / 3)
    if args.ffn_dim_multiplier is not None:
        hidden = int(args.ffn_dim_multiplier * hidden)
    return args.multiple_of * ((hidden + args.multiple_of - 1) // args.multiple_of)


def build(torch, args: ModelArgs, dtype=None):
    """The model as an nn.Module (weights drawn by PyTorch; load others with `load_numpy`)."""
    nn, F = torch.nn, torch.nn.functional
    dtype = dtype or torch.float64

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(dim, dtype=dtype))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def freqs_cis(head_dim, end, theta):  # (end, head_dim / 2) complex: e^(i t w_j)
        w = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(end, dtype=torch.float64), w)
        return torch.polar(torch.ones_like(angles), angles)  # complex128

    def rotate(x, freqs):  # x (B, T, heads, head_dim): adjacent pairs as complex numbers
        z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], -1, 2))
        z = z * freqs[None, :, None, :]  # broadcast over batch and heads
        return torch.view_as_real(z).flatten(3).to(x.dtype)

    def repeat_kv(x, n_rep):  # (B, T, n_kv, d) -> (B, T, n_kv * n_rep, d), each head n_rep times
        if n_rep == 1:
            return x
        B, T, n_kv, d = x.shape
        return x[:, :, :, None, :].expand(B, T, n_kv, n_rep, d).reshape(B, T, n_kv * n_rep, d)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_heads = args.n_heads
            self.n_kv_heads = args.n_kv_heads or args.n_heads
            self.head_dim = args.dim // args.n_heads
            linear = dict(bias=False, dtype=dtype)
            self.wq = nn.Linear(args.dim, self.n_heads * self.head_dim, **linear)
            self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, **linear)
            self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, **linear)
            self.wo = nn.Linear(self.n_heads * self.head_dim, args.dim, **linear)

        def forward(self, x, freqs, mask):
            B, T, _ = x.shape
            q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
            k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
            v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
            q, k = rotate(q, freqs), rotate(k, freqs)
            k = repeat_kv(k, self.n_heads // self.n_kv_heads)
            v = repeat_kv(v, self.n_heads // self.n_kv_heads)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, head_dim)
            scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim) + mask
            out = F.softmax(scores, dim=-1) @ v  # (B, heads, T, head_dim)
            return self.wo(out.transpose(1, 2).contiguous().view(B, T, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = hidden_width(args)
            self.w1 = nn.Linear(args.dim, hidden, bias=False, dtype=dtype)
            self.w2 = nn.Linear(hidden, args.dim, bias=False, dtype=dtype)
            self.w3 = nn.Linear(args.dim, hidden, bias=False, dtype=dtype)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.feed_forward = Attention(), FeedForward()
            self.attention_norm = RMSNorm(args.dim, args.norm_eps)
            self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

        def forward(self, x, freqs, mask):
            h = x + self.attention(self.attention_norm(x), freqs, mask)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim, dtype=dtype)
            self.layers = nn.ModuleList(TransformerBlock() for _ in range(args.n_layers))
            self.norm = RMSNorm(args.dim, args.norm_eps)
            self.output = nn.Linear(args.dim, args.vocab_size, bias=False, dtype=dtype)
            self.freqs_cis = freqs_cis(args.dim // args.n_heads, args.max_seq_len, args.rope_theta)

        def forward(self, tokens):  # (B, T) -> logits (B, T, vocab) at every position
            T = tokens.shape[1]
            h = self.tok_embeddings(tokens)  # no scaling by sqrt(dim)
            mask = torch.triu(torch.full((T, T), float("-inf"), dtype=h.dtype), diagonal=1)
            for layer in self.layers:
                h = layer(h, self.freqs_cis[:T], mask)
            return self.output(self.norm(h))

    return Transformer()


def load_numpy(torch, model, params):
    """Copy a NumPy llama preset's parameters (helpers.modern.DecoderOnly, weights (in, out) as
    x @ W) into `model`: every nn.Linear weight is the transpose. Refuses a missing or extra
    array, so a bias or a tied output on the NumPy side is caught here."""
    names = {"token_embed": ("tok_embeddings.weight", False),
             "W_out": ("output.weight", True), "decoder.norm.gamma": ("norm.weight", False)}
    for i in range(len(model.layers)):
        ours, theirs = f"decoder.layers.{i}.", f"layers.{i}."
        names.update({
            ours + "self_attn.W_q": (theirs + "attention.wq.weight", True),
            ours + "self_attn.W_k": (theirs + "attention.wk.weight", True),
            ours + "self_attn.W_v": (theirs + "attention.wv.weight", True),
            ours + "self_attn.W_o": (theirs + "attention.wo.weight", True),
            ours + "ffn.W_1": (theirs + "feed_forward.w1.weight", True),
            ours + "ffn.V": (theirs + "feed_forward.w3.weight", True),
            ours + "ffn.W_2": (theirs + "feed_forward.w2.weight", True),
            ours + "norm1.gamma": (theirs + "attention_norm.weight", False),
            ours + "norm2.gamma": (theirs + "ffn_norm.weight", False),
        })
    state = model.state_dict()
    if set(names) != set(params) or {t for t, _ in names.values()} != set(state):
        raise ValueError(f"the two models' arrays differ: ours {sorted(set(params) ^ set(names))}"
                         f", theirs {sorted(set(state) ^ {t for t, _ in names.values()})}")
    with torch.no_grad():
        for ours, (theirs, transpose) in names.items():
            value = torch.from_numpy(params[ours].T if transpose else params[ours])
            state[theirs].copy_(value)
    return model
