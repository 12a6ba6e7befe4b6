"""The module protocol every piece of the model follows (README, "Conventions").

forward(...) computes the output and keeps in ``cache`` a named tuple of what backward needs;
backward(d_out) returns (the gradients of forward's inputs, {parameter name: gradient} keyed like
parameters()). Notebook 02 builds the base class; notebook 07 attaches each backward to the class
an earlier notebook defined (add_to_class) and collects the gradients of composite modules.

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/module.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

import numpy as np

# ── 02 · Multi-head attention ────────────────────────────────────────────────────────────────────


def set_parameters(module, params):
    """Copy `params`, a dict shaped like ``module.parameters()``, into `module`'s own arrays.

    Names and shapes are all checked first, so a bad dict changes nothing. The values are
    written into the arrays the module already has (in their dtype), so a dict taken from
    parameters() before, an optimiser's for instance, stays the module's, and a matrix shared
    by two names (tied embeddings) stays shared.
    """
    own = module.parameters()
    if set(params) != set(own):
        missing, unexpected = sorted(set(own) - set(params)), sorted(set(params) - set(own))
        raise ValueError(f"parameter names differ: missing {missing}, unexpected {unexpected}")
    for name, value in params.items():
        if np.shape(value) != own[name].shape:
            raise ValueError(f"{name}: expected shape {own[name].shape}, got {np.shape(value)}")
    for name, value in params.items():
        own[name][...] = value  # in place: the same array, new values


class Module:
    """What every piece of the model shares (a small base class, like micrograd's Module).

    A module keeps its learnable arrays in the attributes that `param_names` lists and its parts
    in attributes that are modules (or lists of modules: a stack of layers). parameters()
    collects both, in attribute order, under dotted names ("W_q", "self_attn.W_q",
    "layers.0.norm1.gamma"); load_parameters() sets them. forward(...) computes the output and
    keeps in `cache` a named tuple of exactly what backward needs; backward(d_out), derived in
    notebook 07, returns (the gradients of forward's inputs, {parameter name: gradient}).
    """

    param_names = ()  # this module's own learnable arrays; its parts bring theirs
    cache = None  # what the last forward kept for backward (None: nothing to go back through)
    own_cache = True  # False: the parts' caches hold everything backward needs

    def parts(self):
        """The sub-modules by attribute name, in the order they were set; a list is name.0, ..."""
        found = {}
        for name, value in vars(self).items():
            if isinstance(value, Module):
                found[name] = value
            elif isinstance(value, list) and any(isinstance(v, Module) for v in value):
                if not all(isinstance(v, Module) for v in value):
                    raise TypeError(f"{type(self).__name__}.{name} mixes modules and other "
                                    "values; a list of parts must hold modules only")
                found.update({f"{name}.{i}": v for i, v in enumerate(value)})
        return found

    def parameters(self):
        """Every learnable array by dotted name (the arrays themselves, not copies)."""
        missing = set(self.param_names) - set(vars(self))
        if missing:
            raise AttributeError(f"{type(self).__name__}.param_names lists {sorted(missing)}, "
                                 "which it does not have")
        params, parts = {}, self.parts()
        for name, value in vars(self).items():  # in attribute order, arrays and parts alike
            if name in self.param_names:
                params[name] = value
            elif name in parts or f"{name}.0" in parts:  # a part, or a list of parts
                prefixes = [name] if name in parts else [f"{name}.{i}" for i in range(len(value))]
                for prefix in prefixes:  # "ffn", or "layers.0", "layers.1", ...
                    inner = parts[prefix].parameters()
                    params.update({f"{prefix}.{k}": v for k, v in inner.items()})
        return params

    def load_parameters(self, params):
        """Set every parameter from a dict like parameters() returns (names and shapes checked)."""
        set_parameters(self, params)

    def modules(self):
        """This module and every module inside it, depth first, in attribute order."""
        yield self
        for part in self.parts().values():
            yield from part.modules()

    def has_cache(self):
        """True if the last forward kept what backward needs: this module's own cache, or, for a
        module whose parts keep everything (own_cache False: a block, a stack), all of theirs."""
        if self.own_cache:
            return self.cache is not None
        return all(part.has_cache() for part in self.parts().values())

    def saved(self):
        """The cache of the last forward, for backward; a clear error if there is none."""
        if not self.has_cache():
            raise ValueError(f"{type(self).__name__}.backward needs the cache of a forward pass, "
                             "and there is none: run forward first (decoding and the widgets "
                             "clear every cache, see clear_caches)")
        return self.cache

    def backward(self, d_out):
        raise NotImplementedError(f"{type(self).__name__}.backward is derived in notebook 07 for "
                                  "the modules of helpers/transformer.py (importing helpers "
                                  "attaches it); a module of your own needs its own")


def clear_caches(module):
    """Forget what every forward inside `module` kept for backward. A forward that no backward
    follows (decoding, a widget) calls this, so that a later backward cannot read stale arrays:
    it raises instead, until forward runs again."""
    for part in module.modules():
        part.cache = None


# ── 07 · Training ────────────────────────────────────────────────────────────────────────────────


def add_to_class(cls, name=None):
    """Decorator: attach the function below to `cls` as the method `name` (default: the
    function's own name), as d2l's add_to_class does. Notebook 07 gives the modules of notebooks
    02-06 their backward pass where it derives it: ``@add_to_class(LayerNorm, "backward")``
    over ``def layer_norm_backward(self, d_out)`` makes it LayerNorm.backward."""
    def attach(method):
        setattr(cls, name or method.__name__, method)
        return method
    return attach


def collect_grads(module, grads):
    """{"W_out": g, "ffn": {"W_1": g, ...}, "layers.0": {...}}: a module's own gradients and those
    of its parts, as one dict keyed and ordered exactly like module.parameters() ("W_out",
    "ffn.W_1", "layers.0.norm1.gamma", ...). A missing or unexpected name raises a ValueError."""
    flat = {}
    for name, g in grads.items():
        if isinstance(g, dict):  # a part's gradients, under the part's name
            flat.update({f"{name}.{key}": value for key, value in g.items()})
        else:
            flat[name] = g
    own = module.parameters()
    if set(flat) != set(own):
        raise ValueError(f"{type(module).__name__}: gradients for {sorted(set(flat) ^ set(own))} "
                         "are missing or unexpected")
    return {name: flat[name] for name in own}
