"""References for nn/rnn: torch.nn.LSTMCell / GRUCell and torch.nn.LSTM / GRU (1 and 2 layers,
uni- and bidirectional, padded batches with unsorted lengths through pack_padded_sequence,
given or zero initial states, with and without biases): outputs, final states and the gradients
of sum(output * g_output) + sum(h_n * g_h_n) [+ sum(c_n * g_c_n)] for the input, the initial
states and every parameter (stored under its torch name: p.<name> values, g.<name> gradients)."""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from qkvref import Refs, grads


def randomize(module, g, scale):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * scale)


def cell_case(r, g, kind, B, I, H, bias):
    cell = (torch.nn.LSTMCell if kind == "lstm" else torch.nn.GRUCell)(I, H, bias=bias)
    randomize(cell, g, 0.6)
    x = torch.randn(B, I, generator=g, requires_grad=True)
    h = torch.randn(B, H, generator=g, requires_grad=True)
    c = torch.randn(B, H, generator=g, requires_grad=True) if kind == "lstm" else None
    if kind == "lstm":
        h1, c1 = cell(x, (h, c))
        outs = [h1, c1]
    else:
        h1 = cell(x, h)
        c1 = None
        outs = [h1]
    gos = [torch.randn(o.shape, generator=g) for o in outs]
    names = [n for n, _ in cell.named_parameters()]
    ins = [x, h] + ([c] if c is not None else []) + [p for _, p in cell.named_parameters()]
    gs = grads(outs, ins, gos)
    t = dict(x=x, h=h, c=c, h1=h1, c1=c1, g_h1=gos[0], g_c1=gos[1] if c is not None else None, g_x=gs[0], g_h=gs[1])
    k = 2
    if c is not None:
        t["g_c"] = gs[2]
        k = 3
    for n, p, gp in zip(names, ins[k:], gs[k:]):
        t["p." + n], t["g." + n] = p, gp
    r.case(f"cell_{kind}_{'bias' if bias else 'nobias'}", {"kind": kind, "bias": bias, "names": names}, **t)


def layer_case(r, g, name, kind, B, T, I, H, L, bi, bias, lengths, given_h0, scale=0.5, f64=False):
    """f64: the f32 inputs and parameters run through torch in float64 and the results are rounded to
    f32, so the case holds the exact answer rather than one f32 summation order of it."""
    mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(I, H, num_layers=L, bias=bias, batch_first=True,
                                                             bidirectional=bi)
    randomize(mod, g, scale)
    dirs = 2 if bi else 1
    x = torch.randn(B, T, I, generator=g, requires_grad=True)
    h0 = torch.randn(L * dirs, B, H, generator=g, requires_grad=True) if given_h0 else None
    c0 = torch.randn(L * dirs, B, H, generator=g, requires_grad=True) if given_h0 and kind == "lstm" else None
    if f64:  # f32 values are exact in f64; the stored values below go back to f32
        mod = mod.double()
        x, h0, c0 = (t.detach().double().requires_grad_() if t is not None else None for t in (x, h0, c0))
    state = None
    if given_h0:
        state = (h0, c0) if kind == "lstm" else h0
    if lengths is not None:
        lens = torch.tensor(lengths, dtype=torch.int64)
        packed = pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        out_p, st = mod(packed, state)
        out, _ = pad_packed_sequence(out_p, batch_first=True, total_length=T)
    else:
        lens = None
        out, st = mod(x, state)
    h_n, c_n = (st if kind == "lstm" else (st, None))
    outs = [out, h_n] + ([c_n] if c_n is not None else [])
    gos = [torch.randn(o.shape, generator=g).to(o.dtype) for o in outs]  # f32 values, exact in f64
    names = [n for n, _ in mod.named_parameters()]
    ins = [x] + [t for t in (h0, c0) if t is not None] + [p for _, p in mod.named_parameters()]
    gs = grads(outs, ins, gos)
    t = dict(x=x, lengths=lens, h0=h0, c0=c0, output=out, h_n=h_n, c_n=c_n, g_output=gos[0], g_h_n=gos[1],
             g_c_n=gos[2] if c_n is not None else None, g_x=gs[0])
    k = 1
    if h0 is not None:
        t["g_h0"] = gs[k]
        k += 1
    if c0 is not None:
        t["g_c0"] = gs[k]
        k += 1
    for n, p, gp in zip(names, ins[k:], gs[k:]):
        t["p." + n], t["g." + n] = p, gp
    if f64:
        t = {k: (v.detach().float() if v is not None and v.is_floating_point() else v) for k, v in t.items()}
    r.case(name, {"kind": kind, "num_layers": L, "bidirectional": bi, "bias": bias, "hidden": H, "names": names}, **t)


def main(out):
    g = torch.Generator().manual_seed(11)
    r = Refs()
    for kind in ("lstm", "gru"):
        for bias in (True, False):
            cell_case(r, g, kind, 3, 5, 7, bias)
        layer_case(r, g, f"{kind}_l1_uni", kind, 3, 5, 4, 6, 1, False, True, None, False)
        layer_case(r, g, f"{kind}_l1_uni_nobias_h0", kind, 2, 4, 3, 5, 1, False, False, None, True)
        layer_case(r, g, f"{kind}_l1_bi_pad", kind, 4, 6, 5, 7, 1, True, True, [6, 2, 5, 1], False)
        # max(lengths) < T: every row ends before the padded tail
        layer_case(r, g, f"{kind}_l2_uni_pad_h0", kind, 4, 5, 3, 6, 2, False, True, [3, 1, 4, 2], True)
        layer_case(r, g, f"{kind}_l2_bi_pad_h0", kind, 5, 7, 4, 8, 2, True, True, [4, 7, 1, 7, 3], True)
        layer_case(r, g, f"{kind}_l2_bi_full", kind, 3, 4, 6, 5, 2, True, True, None, False)
        # B * H above the gate kernels' OpenMP threshold, H not a multiple of the vector width; its
        # weight gradients sum 100 rows with cancellation, so two f32 orders differ by more than
        # either's error: the reference is the f64 answer
        layer_case(r, g, f"{kind}_l1_bi_wide_pad", kind, 20, 5, 24, 421, 1, True, True,
                   [5, 3, 5, 1, 2, 4, 5, 5, 3, 2, 1, 4, 5, 5, 2, 3, 4, 5, 1, 5], True, scale=0.05, f64=True)
    r.save(out)
