"""References for ops/elementwise: forward and input gradients of every unary and binary op,
on random shapes with broadcasting and non-contiguous (transposed) inputs."""
import torch
import torch.nn.functional as F
from qkvref import Refs, grads

UNARY = {
    "neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "abs": torch.abs,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu,
    "gelu": lambda x: F.gelu(x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "square": torch.square, "pow3": lambda x: torch.pow(x, 3.0), "pow_half": lambda x: torch.pow(x, 0.5),
}
POSITIVE = {"log", "sqrt", "pow_half"}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
SHAPE_PAIRS = [((5, 7), (5, 7)), ((4, 3, 6), (6,)), ((2, 1, 5), (3, 1)), ((1,), (3, 4)),
               ((2, 3, 4, 5), (2, 1, 4, 1)), ((), (3, 2)), ((64, 33), (64, 1))]


def main(out):
    g = torch.Generator().manual_seed(1)
    r = Refs()
    for name, fn in UNARY.items():
        for i, shape in enumerate([(17,), (3, 5, 8), (40, 1000)]):
            x = torch.randn(shape, generator=g)
            if name in POSITIVE:
                x = x.abs() + 0.1
            if name in ("abs", "relu"):
                x[x.abs() < 1e-3] = 0.5  # keep away from the kink
            transposed = len(shape) >= 2 and i == 1
            xin = x.transpose(-1, -2).contiguous() if transposed else x  # stored (.., b, a)
            xr = x.clone().requires_grad_(True)
            y = fn(xr)
            gy = torch.randn(y.shape, generator=g)
            (gx,) = grads(y, [xr], gy)
            r.case(f"unary_{name}_{i}", {"op": name, "transposed": transposed}, x=xin, y=y, gy=gy, gx=gx)
    # The f32 activation kernels (no libm: polynomials + kernels::vexp) over a wide range: dense
    # [-30, 30], saturation/underflow points, random. Computed in f64 and rounded to f32, so the
    # reference is the true value rather than torch's own f32 approximation.
    for name in ("exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"):
        special = [-100., -88., -60., -20., -13.5, -9., -5., 5., 9., 13.5, 20., 60., 88., 100.]
        x = torch.cat([torch.linspace(-30, 30, 1201, dtype=torch.float64), torch.tensor(special, dtype=torch.float64),
                       torch.randn(400, generator=g, dtype=torch.float64) * 6])
        if name == "exp":
            x = x.clamp(-80, 80)
        x = x.float().double()  # exactly representable in f32
        xr = x.clone().requires_grad_(True)
        y = UNARY[name](xr)
        gy = torch.randn(y.shape, generator=g, dtype=torch.float64).float().double()
        (gx,) = grads(y, [xr], gy)
        r.case(f"unary_{name}_wide", {"op": name, "transposed": False}, x=x.float(), y=y.float(), gy=gy.float(),
               gx=gx.float())
    for name, fn in BINARY.items():
        for i, (sa, sb) in enumerate(SHAPE_PAIRS):
            a = torch.randn(sa, generator=g, requires_grad=True)
            b = torch.randn(sb, generator=g)
            if name == "div":
                b = b.sign() * (b.abs() + 0.5)
            b.requires_grad_(True)
            y = fn(a, b)
            gy = torch.randn(y.shape, generator=g)
            ga, gb = grads(y, [a, b], gy)
            r.case(f"binary_{name}_{i}", {"op": name}, a=a, b=b, y=y, gy=gy, ga=ga, gb=gb)
    r.save(out)
