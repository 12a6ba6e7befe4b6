"""Translation (notebook 11): words, byte-pair encoding, batches by length, beam search, BLEU and
checkpoint averaging, for the encoder-decoder of notebooks 06 and 07 on Multi30k.

Every definition below is written in notebook 11 first, in a cell that starts with
``# saved in helpers/translation.py``; ``tests/test_sync.py`` proves the two copies are identical.
The model is notebook 06's Transformer, trained by notebook 07's train; decoding runs its own
KV-cached path (Transformer.decode with KVCache), as greedy_decode does.
"""

import heapq
import math
import re
from collections import Counter, defaultdict

import numpy as np

from helpers.decoding import greedy_decode, kv_caches
from helpers.module import clear_caches
from helpers.training import log_softmax
from helpers.transformer import Dropout, Transformer
from helpers.validation import check_flag, check_ids, check_int, check_number, check_token_id

# ── 11 · Translating real sentences ──────────────────────────────────────────────────────────────

_SPLIT = [  # sacrebleu's 13a tokenizer (mteval-v13a, the one WMT's BLEU uses), its four rules
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # symbols but - . , '
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # . and , unless after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # . and , unless before a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # - after a digit
]
_SPACED = str.maketrans(  # the first rule as a table for str.translate (the same, and faster):
    {c: f" {c} " for c in map(chr, range(128)) if _SPLIT[0][0].fullmatch(c)})  # ASCII only


def words(sentence):
    """A sentence -> its words, split as BLEU's standard tokenizer (13a) splits them:
    "Two young, White males." -> ['Two', 'young', ',', 'White', 'males', '.']."""
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a str, got {type(sentence).__name__}")
    line = sentence.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    for entity, char in (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(entity, char)
    line = f" {line} ".translate(_SPACED)  # the first rule
    for pattern, replacement in _SPLIT[1:]:
        line = pattern.sub(replacement, line)
    return line.split()


def count_pairs(spelled):
    """{word as a tuple of symbols: count} -> {adjacent pair of symbols: count}."""
    pairs = Counter()
    for symbols, count in spelled.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += count
    return pairs


def merge_pair(symbols, pair):
    """Every occurrence of `pair` in `symbols` merged into one symbol, left to right."""
    merged, j = [], 0
    while j < len(symbols):
        if j + 1 < len(symbols) and (symbols[j], symbols[j + 1]) == pair:
            merged.append(symbols[j] + symbols[j + 1])
            j += 2
        else:
            merged.append(symbols[j])
            j += 1
    return merged


def bpe_step(spelled):
    """One merge of byte-pair encoding: the most frequent adjacent pair (ties: the pair
    larger as strings) merged everywhere. Returns (pair, the words spelled anew)."""
    pairs = count_pairs(spelled)
    if not pairs:
        raise ValueError("spelled has no word of two symbols or more: nothing to merge")
    pair = max(pairs, key=lambda p: (pairs[p], p))
    merged = Counter()  # two spellings of one word, if given, become one: their counts add up
    for symbols, count in spelled.items():
        merged[tuple(merge_pair(list(symbols), pair))] += count
    return pair, dict(merged)


END = "</w>"  # the end-of-word marker: "low</w>" ends a word, "low" starts one (as "lower")


def _descending(pair):
    """A key that orders pairs of strings backwards, so that a min-heap pops the largest."""
    return tuple(tuple(-ord(char) for char in s) + (0,) for s in pair)


def learn_bpe(word_counts, n_merges):
    """Byte-pair encoding (Sennrich et al. 2016), learned from {word: count}: split every word
    into characters (the last one marked END), then `n_merges` times merge the most frequent
    adjacent pair of symbols everywhere (ties: the pair larger as strings, as in subword-nmt),
    until no pair occurs twice. Returns the merges, in order: [(left, right), ...]."""
    n_merges = check_int(n_merges, "n_merges", "[0, inf)")
    if not isinstance(word_counts, dict) or not all(
            isinstance(w, str) and w and not any(c.isspace() for c in w)
            and isinstance(n, (int, np.integer)) and n > 0 for w, n in word_counts.items()):
        raise ValueError("word_counts must be a dict {word: count}, words non-empty and without "
                         "spaces, counts positive integers")
    spelled = [[*word[:-1], word[-1] + END] for word in word_counts]  # symbols of each word
    counts = list(word_counts.values())
    pairs, where = Counter(), defaultdict(set)  # pair -> count, pair -> words that have it
    for i, symbols in enumerate(spelled):
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += counts[i]
            where[pair].add(i)
    keys = {pair: _descending(pair) for pair in pairs}  # each pair's heap key, made once
    heap = [(-n, keys[pair], pair) for pair, n in pairs.items()]
    heapq.heapify(heap)  # the most frequent pair on top; stale entries are skipped when popped
    merges = []
    while len(merges) < n_merges and heap:
        minus_n, _, best = heapq.heappop(heap)
        if pairs.get(best) != -minus_n:
            continue  # this count is out of date: a newer entry holds the pair's count
        if -minus_n < 2:
            break
        merges.append(best)
        joined, change = best[0] + best[1], Counter()  # pair -> how much its count changes
        for i in where.pop(best):
            old, new = spelled[i], merge_pair(spelled[i], best)
            for pair in zip(old, old[1:]):
                change[pair] -= counts[i]
            for pair in zip(new, new[1:]):
                change[pair] += counts[i]
                if joined in pair:  # a pair this merge made: word i has it now
                    where[pair].add(i)
            spelled[i] = new
        for pair, delta in change.items():
            if delta == 0:
                continue  # its count and its heap entry stay as they are
            pairs[pair] += delta
            if pairs[pair] > 0:
                keys[pair] = keys.get(pair) or _descending(pair)
                heapq.heappush(heap, (-pairs[pair], keys[pair], pair))
            else:
                del pairs[pair]
    return merges


def segment(word, ranks):
    """One word -> its subword pieces: from its characters, merge the adjacent pair learned
    earliest (the lowest rank in {pair: rank}) until no pair of it was learned."""
    if not isinstance(word, str) or not word:
        raise ValueError(f"word must be a non-empty str, got {word!r:.40}")
    symbols = [*word[:-1], word[-1] + END]
    while len(symbols) > 1:
        pair = min(zip(symbols, symbols[1:]), key=lambda p: ranks.get(p, math.inf))
        if pair not in ranks:
            break
        symbols = merge_pair(symbols, pair)
    return symbols


SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # padding, BOS, EOS, unknown: ids 0-3, always


class Vocabulary:
    """One subword vocabulary for both languages (paper §5.1: a shared source-target
    vocabulary): the merges of learn_bpe, and the pieces' ids, the four SPECIALS first, then
    `pieces` in their order. Vocabulary.learn builds one from training words. A word is split
    into pieces by its merges; a piece the vocabulary lacks (a character never seen) is UNK."""

    def __init__(self, merges, pieces):
        self.merges = [tuple(pair) for pair in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}  # earliest merged: 0
        self.tokens = [*SPECIALS, *pieces]
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)
        self._pieces = {}  # word -> pieces: every word is segmented once

    @classmethod
    def learn(cls, word_counts, n_merges):
        """learn_bpe on {word: count}, and the pieces the words segment into, most frequent
        first."""
        vocab = cls(learn_bpe(word_counts, n_merges), [])
        counts = Counter()
        for word, count in word_counts.items():
            for piece in vocab.segment(word):
                counts[piece] += count
        return cls(vocab.merges, sorted(counts, key=lambda p: (-counts[p], p)))

    def __len__(self):
        return len(self.tokens)

    def segment(self, word):
        if word not in self._pieces:
            self._pieces[word] = segment(word, self.ranks)
        return self._pieces[word]

    def encode(self, sentence):
        """A sentence -> its piece ids, then EOS."""
        return [self.ids.get(piece, self.unk_id) for word in words(sentence)
                for piece in self.segment(word)] + [self.eos_id]

    def decode(self, ids):
        """Piece ids -> the words they spell, joined by spaces (up to the first EOS; BOS and
        PAD skipped)."""
        text = []
        for i in check_ids(ids, "ids", len(self.tokens), ndim=1, min_size=0).tolist():
            if i == self.eos_id:
                break
            if i > self.eos_id:
                text.append(self.tokens[i].replace(END, " "))
        return "".join(text).strip()


def length_batches(src_lengths, tgt_lengths, max_tokens, rng=None):
    """Batches by approximate length (paper §5.1): sentence pairs ordered by length (ties in a
    random order when `rng` is given) and cut into batches whose padded source and target each
    hold at most `max_tokens` tokens. Returns a list of index arrays, in a random order with
    `rng`."""
    src_lengths, tgt_lengths = np.asarray(src_lengths), np.asarray(tgt_lengths)
    if src_lengths.ndim != 1 or src_lengths.shape != tgt_lengths.shape or not all(
            a.dtype.kind in "iu" and (a > 0).all() for a in (src_lengths, tgt_lengths)):
        raise ValueError("src_lengths and tgt_lengths must be two lists of positive integers of "
                         f"one length, got shapes {src_lengths.shape} and {tgt_lengths.shape}")
    max_tokens = check_int(max_tokens, "max_tokens", "[1, inf)")
    ties = np.zeros(len(src_lengths)) if rng is None else rng.random(len(src_lengths))
    order = np.lexsort((ties, src_lengths, tgt_lengths))  # by target, then source length
    batches, start = [], 0
    while start < len(order):
        end, longest = start, 0
        while end < len(order):
            i = order[end]
            longest = max(longest, src_lengths[i], tgt_lengths[i])
            if (end + 1 - start) * longest > max_tokens and end > start:
                break
            end += 1
        batches.append(order[start:end])
        start = end
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def pad(sequences, pad_id=0):
    """Lists of ids -> one array (B, longest), padded at the end with pad_id."""
    if not len(sequences) or not all(len(s) for s in sequences):
        raise ValueError("sequences must be a non-empty list of non-empty lists of ids")
    out = np.full((len(sequences), max(map(len, sequences))), pad_id)
    for row, sequence in zip(out, sequences):
        row[:len(sequence)] = sequence
    return out


def batch_arrays(src, tgt, rows, bos_id=1, pad_id=0):
    """The batch of pairs `rows`: src (B, S), the decoder input tgt_in (B, T) = BOS then the
    target without its EOS, and tgt_out (B, T) = the target, each padded with pad_id."""
    targets = [tgt[i] for i in rows]
    return (pad([src[i] for i in rows], pad_id), pad([[bos_id, *t[:-1]] for t in targets], pad_id),
            pad(targets, pad_id))


def encode_pairs(vocab, german, english):
    """Sentence pairs -> (source ids, target ids) lists, each ending with EOS."""
    return [vocab.encode(s) for s in german], [vocab.encode(s) for s in english]


def epochs_of_batches(src, tgt, max_tokens, rng):
    """batches(step) for notebook 07's train: step 1, 2, ... walks through length_batches of the
    pairs, in a new random order every epoch. Returns ((src, tgt_in), tgt_out) per step."""
    src_lengths, tgt_lengths = [len(s) for s in src], [len(t) for t in tgt]
    queue = []

    def batches(step):
        if not queue:
            queue.extend(length_batches(src_lengths, tgt_lengths, max_tokens, rng))
        s, t_in, t_out = batch_arrays(src, tgt, queue.pop(0))
        return (s, t_in), t_out

    return batches


def length_penalty(length, alpha=0.6):
    """GNMT's length penalty lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016), which the paper
    uses with alpha = 0.6 (§6.1): a candidate's score is log P(Y | X) / lp(Y)."""
    return ((5.0 + length) / 6.0) ** alpha


def beam_step(log_p, step, eos_id, length, alpha=0.6):
    """One step of beam search for one sentence. log_p (k,): the log-probabilities of its k
    live candidates; step (k, V): each one's log-probabilities of the next token; length: the
    candidates' length after this step (EOS included). Of the k * V continuations, take the best
    2k by log-probability: an EOS among the first k finishes its candidate, scored by
    log P / length_penalty(length, alpha); the first k others live on.
    Returns (origin (k,), token (k,), log_p (k,)) of those that live, each continuation's
    candidate and new token, and the finished ones as [(origin, log P, score)], best first."""
    log_p, step = np.asarray(log_p), np.asarray(step)
    if step.ndim != 2 or log_p.shape != step.shape[:1] or step.shape[1] <= 2 * len(log_p):
        raise ValueError(f"log_p must have shape (k,) and step (k, V) with V > 2k, got "
                         f"{log_p.shape} and {step.shape}")
    k, V = step.shape
    total = (log_p[:, None] + step).reshape(-1)  # (k * V,): every candidate times every token
    best = np.argsort(-total, kind="stable")[:2 * k]  # (2k,), the most likely first
    origin, token = best // V, best % V
    finished = [(origin[j], total[best[j]], total[best[j]] / length_penalty(length, alpha))
                for j in range(k) if token[j] == eos_id]
    live = np.flatnonzero(token != eos_id)[:k]  # at most k of 2k are EOS: one per candidate
    return origin[live], token[live], total[best[live]], finished


def keep_rows(caches, rows):
    """Beam search's bookkeeping: each self-attention KVCache keeps the rows of the beams it
    continues (B * beam,). The cross-attention caches need none: a sentence's beams share one
    memory, so their rows are equal."""
    for layer in caches:
        cache = layer["self_attn"]
        cache.K, cache.V = cache.K[rows], cache.V[rows]
        if cache.tokens is not None:  # the first block's cache keeps the tokens (KVCache.start)
            cache.tokens = cache.tokens[rows]


def beam_search(model, src, bos_id, eos_id, max_steps, *, beam=4, alpha=0.6, use_cache=True):
    """Beam search (paper §6.1: beam 4, length penalty alpha = 0.6) for a batch of sources src
    (B, S), through the same KV-cached decoding path as greedy_decode: every sentence keeps
    `beam` candidates, extended one token at a time by beam_step, until it has `beam` finished
    ones (at max_steps, its live ones count as finished). Returns, per sentence, its finished
    candidates best first, as (tokens without BOS, log P, score); beam=1 is greedy decoding.
    Padding is never a token. use_cache=False re-runs the decoder on whole prefixes every step
    (for checking). Dropout must be off."""
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a Transformer (notebook 06), got {type(model).__name__}")
    k, alpha = check_int(beam, "beam", "[1, inf)"), check_number(alpha, "alpha", "[0, inf)")
    bos_id = check_token_id(bos_id, "bos_id", model.tgt_vocab)
    eos_id = check_token_id(eos_id, "eos_id", model.tgt_vocab)
    max_steps = check_int(max_steps, "max_steps", f"[1, {len(model.pe)}]")
    use_cache = check_flag(use_cache, "use_cache")
    if 2 * k >= model.tgt_vocab - 1:
        raise ValueError(f"beam={k} needs a vocabulary of more than {2 * k + 1} tokens, the "
                         f"model has {model.tgt_vocab}")
    if any(isinstance(m, Dropout) and m.rng is not None for m in model.modules()):
        raise ValueError("beam_search runs in evaluation mode: call set_training(model, None)")
    try:
        memory, src_mask = model.encode(src)  # (B, S, d_model)
        B, V = len(memory), model.tgt_vocab
        memory = np.repeat(memory, k, axis=0)  # (B * k, S, d_model): one row per candidate
        src_mask = None if src_mask is None else np.repeat(src_mask, k, axis=0)
        tokens = np.full((B * k, 1), bos_id)  # (B * k, t): row b * k + j is candidate j of b
        log_p = np.full((B, k), -np.inf)
        log_p[:, 0] = 0.0  # one live candidate at first: the others would repeat it
        caches = kv_caches(model.decoder) if use_cache else None
        finished = [[] for _ in range(B)]
        for t in range(1, max_steps + 1):
            x = model.decode(tokens, memory, src_mask, caches)[:, -1]  # (B * k, d_model)
            step = log_softmax(model.logits(x).astype(np.float64)).reshape(B, k, V)
            if model.pad_id is not None:
                step[..., model.pad_id] = -np.inf
            origin, token = np.zeros((B, k), int), np.full((B, k), eos_id)
            for b in range(B):
                if len(finished[b]) < k:  # a finished sentence's rows run on, unused
                    origin[b], token[b], log_p[b], done = beam_step(log_p[b], step[b], eos_id,
                                                                    t, alpha)
                    finished[b] += [([*tokens[b * k + o, 1:], eos_id], lp, score)
                                    for o, lp, score in done]
            if all(len(f) >= k for f in finished):
                break
            rows = (np.arange(B)[:, None] * k + origin).reshape(-1)  # (B * k,)
            tokens = np.concatenate([tokens[rows], token.reshape(-1, 1)], axis=1)
            if use_cache:
                keep_rows(caches, rows)
        else:  # out of steps: the live candidates count as finished
            for b in range(B):  # its live candidates, best first, up to k finished in all
                finished[b] += [(list(tokens[b * k + j, 1:]), log_p[b, j],
                                 log_p[b, j] / length_penalty(max_steps, alpha))
                                for j in range(k)][:max(k - len(finished[b]), 0)]
    finally:
        clear_caches(model)
    return [sorted(f, key=lambda c: -c[2])[:k] for f in finished]


def translate(model, vocab, sentences, *, beam=None, alpha=0.6, batch=100):
    """German sentences -> English ones: greedy decoding (beam None) or beam_search, batches
    of sentences of similar length; at most 50 tokens more than the source (paper §6.1), within
    the model's positions."""
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of sentences, got one str: wrap it in [ ]")
    ids = [vocab.encode(s) for s in sentences]
    order = np.argsort([len(i) for i in ids], kind="stable")
    out = [None] * len(ids)
    for start in range(0, len(ids), batch):
        rows = order[start:start + batch]
        src = pad([ids[i] for i in rows], vocab.pad_id)  # (B, S)
        steps = min(src.shape[1] + 50, len(model.pe))
        if beam is None:
            tokens = greedy_decode(model, src, vocab.bos_id, vocab.eos_id, steps)[0][:, 1:]
        else:
            tokens = [c[0][0] for c in beam_search(model, src, vocab.bos_id, vocab.eos_id, steps,
                                                    beam=beam, alpha=alpha)]
        for i, row in zip(rows, tokens):
            out[i] = vocab.decode(row)
    return out


def ngrams(tokens, n):
    """{n-gram: count} of a list of tokens."""
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu(hypotheses, references, max_n=4):
    """Corpus BLEU (Papineni et al. 2002) in percent, as sacrebleu computes it by default: the
    geometric mean of the clipped n-gram precisions (n = 1..max_n; each hypothesis n-gram counts
    at most as often as the reference has it), summed over the whole corpus first, times the
    brevity penalty exp(1 - r / c) when the c hypothesis words are fewer than the r reference
    words. Sentences are split into words by `words` (13a). A precision of 0 gives 0 (sacrebleu
    then smooths it to a positive score instead)."""
    if isinstance(hypotheses, str) or isinstance(references, str) \
            or len(hypotheses) != len(references) or not len(hypotheses):
        raise ValueError("hypotheses and references must be lists of sentences of one length, "
                         f"at least one; got {len(hypotheses)} and {len(references)}")
    max_n = check_int(max_n, "max_n", "[1, inf)")
    matches, totals, c, r = np.zeros(max_n), np.zeros(max_n), 0, 0
    for hypothesis, reference in zip(hypotheses, references):
        hyp, ref = words(hypothesis), words(reference)
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, max_n + 1):
            ref_counts = ngrams(ref, n)
            matches[n - 1] += sum(min(k, ref_counts[g]) for g, k in ngrams(hyp, n).items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if not matches.all():
        return 0.0
    brevity = 1.0 if c >= r else math.exp(1 - r / c)
    return float(100 * brevity * np.exp(np.mean(np.log(matches / totals))))


def average_checkpoints(checkpoints):
    """The paper's checkpoint averaging (§6.1): [{name: array}, ...] -> {name: their mean}."""
    if not checkpoints or any(c.keys() != checkpoints[0].keys() or any(
            np.shape(c[n]) != np.shape(checkpoints[0][n]) for n in c) for c in checkpoints):
        raise ValueError("checkpoints must be a non-empty list of dicts with the same names and "
                         "shapes")
    return {name: np.mean([c[name] for c in checkpoints], axis=0).astype(checkpoints[0][name].dtype)
            for name in checkpoints[0]}


def cross_attention(model, src, tgt_in):
    """The cross-attention weights of every decoder block when the model reads src (B, S) and
    the decoder input tgt_in (B, T) (BOS, then the translation): (n_layers, B, h, T, S); row t
    is where the decoder looked in the source to predict target piece t (counted from 0), having
    read BOS and target pieces 0 to t - 1."""
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a Transformer (notebook 06), got {type(model).__name__}")
    try:
        model.forward(src, tgt_in)
        return np.stack([block.cross_attn.weights for block in model.decoder.layers])
    finally:
        clear_caches(model)
