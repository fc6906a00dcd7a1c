"""References for ops/shape: forward and input gradients of the view, join/split and indexing ops.

Every case stores its leaf tensors ("x", or "x0".. for concat, "a"/"b" for where) contiguous; the
parameter "pre" tells the test which view of the leaf the op sees ("none", "t" = transpose of the
last two axes, "s2" = every second element of the last axis), so non-contiguous inputs are
covered and the gradient is compared on the leaf. Outputs y / y0.., upstream gradients gy / gy0..,
leaf gradients gx / gx0.. (ga / gb for where).
"""
import torch
from qkvref import Refs, grads


def pre_view(t, pre):
    if pre == "t":
        return t.transpose(-1, -2)
    if pre == "s2":
        return t[..., ::2]
    return t


def leaf(g, shape, pre):
    """A random leaf whose `pre` view has the given logical shape."""
    shape = list(shape)
    if pre == "t":
        shape[-1], shape[-2] = shape[-2], shape[-1]
    elif pre == "s2":
        shape[-1] = 2 * shape[-1]
    return torch.randn(shape, generator=g, requires_grad=True)


def single(r, g, name, shape, pre, fn, params):
    x = leaf(g, shape, pre)
    y = fn(pre_view(x, pre))
    gy = torch.randn(y.shape, generator=g)
    (gx,) = grads(y, [x], gy)
    r.case(name, dict(params, pre=pre), x=x, y=y, gy=gy, gx=gx)


def main(out):
    g = torch.Generator().manual_seed(3)
    r = Refs()
    # ---- views ----
    for i, (shape, pre, new) in enumerate([((2, 3, 4), "none", (6, -1)), ((2, 3, 4), "t", (4, 6)),
                                           ((3, 4, 5), "s2", (-1,)), ((4, 6), "none", (2, 2, 3, 2)),
                                           ((5, 1, 4), "none", (5, 4, 1))]):
        single(r, g, f"reshape_{i}", shape, pre, lambda x: x.reshape(new), {"op": "reshape", "shape": list(new)})
    for i, (shape, pre, dims) in enumerate([((2, 3, 4), "none", [2, 0, 1]), ((2, 3, 4, 5), "t", [0, 2, -1, 1]),
                                            ((3, 5), "s2", [1, 0])]):
        single(r, g, f"permute_{i}", shape, pre, lambda x: x.permute(dims), {"op": "permute", "dims": dims})
    for i, (shape, pre, a, b) in enumerate([((3, 4), "none", 0, 1), ((2, 3, 4), "t", -1, 0), ((2, 3, 6), "s2", 1, 2)]):
        single(r, g, f"transpose_{i}", shape, pre, lambda x: x.transpose(a, b), {"op": "transpose", "a": a, "b": b})
    for i, (shape, pre, ax) in enumerate([((3, 4), "none", 0), ((3, 4), "t", -1), ((2, 3, 4), "s2", 2), ((5,), "none", -2)]):
        single(r, g, f"unsqueeze_{i}", shape, pre, lambda x: x.unsqueeze(ax), {"op": "unsqueeze", "axis": ax})
    for i, (shape, pre, ax) in enumerate([((3, 1, 4), "none", 1), ((1, 4), "t", -1), ((2, 3, 4), "none", 1)]):
        single(r, g, f"squeeze_{i}", shape, pre, lambda x: x.squeeze(ax), {"op": "squeeze", "axis": ax})
    slices = [((10, 3), "none", 0, 2, 8, 1), ((10, 3), "none", 0, -7, -1, 3), ((4, 9), "t", 1, 1, 100, 2),
              ((3, 12), "s2", -1, -4, None, 1), ((6, 5), "none", 1, 3, 2, 1), ((7,), "none", 0, -100, 5, 2),
              ((2, 8, 3), "none", 1, 0, None, 3)]
    for i, (shape, pre, ax, s, e, st) in enumerate(slices):
        def fn(x, ax=ax, s=s, e=e, st=st):
            idx = [slice(None)] * x.dim()
            idx[ax] = slice(s, e, st)
            return x[tuple(idx)]
        single(r, g, f"slice_{i}", shape, pre, fn, {"op": "slice", "axis": ax, "start": s, "end": e, "step": st})
    for i, (shape, pre, to) in enumerate([((3, 1), "none", (3, 4)), ((1, 4), "t", (2, 5, 4, 4)), ((4,), "none", (2, 3, 4)),
                                          ((2, 1, 3), "s2", (2, 5, 3))]):
        single(r, g, f"expand_{i}", shape, pre, lambda x: x.expand(*to), {"op": "expand", "shape": list(to)})
    for i, (shape, pre) in enumerate([((3, 4), "none"), ((3, 4), "t"), ((2, 5), "s2")]):
        single(r, g, f"contiguous_{i}", shape, pre, lambda x: x.contiguous(), {"op": "contiguous"})
    for i, (shape, pre, s, e) in enumerate([((2, 3, 4, 5), "none", 1, 2), ((2, 3, 4), "t", 0, -1), ((2, 3, 4), "s2", -2, -1)]):
        single(r, g, f"flatten_{i}", shape, pre, lambda x: x.flatten(s, e), {"op": "flatten", "start": s, "end": e})

    # ---- concat / split / chunk ----
    for i, (shapes, pres, ax) in enumerate([([(2, 3), (4, 3), (1, 3)], ["none", "t", "s2"], 0),
                                            ([(2, 3, 1), (2, 3, 4)], ["none", "s2"], -1),
                                            ([(3, 2, 4), (3, 5, 4)], ["t", "none"], 1)]):
        xs = [leaf(g, s, p) for s, p in zip(shapes, pres)]
        y = torch.cat([pre_view(x, p) for x, p in zip(xs, pres)], ax)
        gy = torch.randn(y.shape, generator=g)
        gxs = grads(y, xs, gy)
        tensors = {f"x{k}": x for k, x in enumerate(xs)}
        tensors.update({f"gx{k}": gx for k, gx in enumerate(gxs)})
        r.case(f"concat_{i}", {"op": "concat", "axis": ax, "pres": pres, "n": len(xs)}, y=y, gy=gy, **tensors)
    splits = [("split", (7, 4), "none", [2, 0, 5], 0), ("split", (3, 6), "t", [1, 3, 2], -1),
              ("chunk", (5, 8), "none", 3, 1), ("chunk", (6, 2), "s2", 4, 0), ("chunk", (4, 10), "t", 2, 0)]
    for i, (kind, shape, pre, arg, ax) in enumerate(splits):
        x = leaf(g, shape, pre)
        v = pre_view(x, pre)
        ys = torch.split(v, arg, ax) if kind == "split" else torch.chunk(v, arg, ax)
        gys = [torch.randn(y.shape, generator=g) for y in ys]
        loss = sum((y * gy).sum() for y, gy in zip(ys, gys))
        (gx,) = torch.autograd.grad(loss, [x])
        tensors = {f"y{k}": y for k, y in enumerate(ys)}
        tensors.update({f"gy{k}": gy for k, gy in enumerate(gys)})
        r.case(f"{kind}_{i}", {"op": kind, "arg": arg, "axis": ax, "pre": pre, "n": len(ys)}, x=x, gx=gx, **tensors)

    # ---- indexing ----
    gathers = [((4, 5), "none", 1, (4, 7), torch.int64), ((6, 3), "t", 0, (9, 2), torch.int64),
               ((3, 4, 6), "s2", -1, (2, 4, 5), torch.int32), ((5, 4, 2), "none", 1, (5, 8, 2), torch.int64)]
    for i, (shape, pre, ax, ishape, idt) in enumerate(gathers):
        n = shape[ax]
        index = torch.randint(0, n, ishape, generator=g).to(idt)  # duplicates on purpose
        x = leaf(g, shape, pre)
        y = torch.gather(pre_view(x, pre), ax, index.long())
        gy = torch.randn(y.shape, generator=g)
        (gx,) = grads(y, [x], gy)
        r.case(f"gather_{i}", {"op": "gather", "axis": ax, "pre": pre}, x=x, index=index, y=y, gy=gy, gx=gx)
    selects = [((6, 4), "none", 0, [5, 0, 5, 2, 5], torch.int64), ((3, 7), "t", 1, [2, 2, 1], torch.int32),
               ((2, 5, 6), "s2", -2, [4, 0, 4, 4, 3, 1, 0], torch.int64), ((3, 4), "none", 1, [], torch.int64)]
    for i, (shape, pre, ax, idx, idt) in enumerate(selects):
        index = torch.tensor(idx, dtype=idt)
        x = leaf(g, shape, pre)
        y = torch.index_select(pre_view(x, pre), ax, index.long())
        gy = torch.randn(y.shape, generator=g)
        (gx,) = grads(y, [x], gy)
        r.case(f"index_select_{i}", {"op": "index_select", "axis": ax, "pre": pre}, x=x, index=index, y=y, gy=gy, gx=gx)
    wheres = [((3, 4), (3, 4), (3, 4), "none", torch.bool), ((4, 1), (1, 5), (4, 5), "t", torch.bool),
              ((2, 1, 6), (3, 6), (1,), "s2", torch.uint8), ((5,), (2, 3, 5), (3, 1), "none", torch.bool)]
    for i, (cs, sa, sb, pre, cdt) in enumerate(wheres):
        cond = (torch.rand(cs, generator=g) > 0.5).to(cdt)
        a = leaf(g, sa, pre)
        b = torch.randn(sb, generator=g, requires_grad=True)
        y = torch.where(cond.bool(), pre_view(a, pre), b)
        gy = torch.randn(y.shape, generator=g)
        ga, gb = grads(y, [a, b], gy)
        r.case(f"where_{i}", {"op": "where", "pre": pre}, cond=cond, a=a, b=b, y=y, gy=gy, ga=ga, gb=gb)
    fills = [((3, 4), (3, 4), "none", torch.bool, -1e9), ((2, 3, 5), (1, 5), "t", torch.bool, 0.0),
             ((4, 6), (4, 1), "s2", torch.uint8, 2.5), ((2, 2, 3), (), "none", torch.bool, -3.0)]
    for i, (shape, ms, pre, mdt, value) in enumerate(fills):
        mask = (torch.rand(ms, generator=g) > 0.5).to(mdt)
        if ms == ():
            mask = torch.tensor(True)
        x = leaf(g, shape, pre)
        y = pre_view(x, pre).masked_fill(mask.bool(), value)
        gy = torch.randn(y.shape, generator=g)
        (gx,) = grads(y, [x], gy)
        r.case(f"masked_fill_{i}", {"op": "masked_fill", "pre": pre, "value": value}, x=x, mask=mask, y=y, gy=gy, gx=gx)
    r.save(out)
