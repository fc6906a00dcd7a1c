"""References for train/ (optimizers, LR schedules, clipping): torch.optim 1.13 on a small
two-layer network, x (16, 8) -> Linear(8, 32) -> tanh -> Linear(32, 4) -> MSE vs y (16, 4).

Case "net": the data and the seeded initial parameters. Each training case runs 20 steps
(zero_grad, forward, backward, [clip_grad_norm_], optimizer.step(), scheduler.step()) from
those parameters and stores, per step s (axis 0): the raw gradients before clipping g_<p>, the
parameters after the step p_<p>, the lr used, the total grad norm and the loss. Parameter
groups are [w1, w2] (weight decay) and [b1, b2] (no decay), so the state index order is
w1, w2, b1, b2. Schedules run through torch's LambdaLR with the optimizer's lr set to 1, so
the lambda's value is the lr; the lambda gets the 1-based update number (e + 1).
Cases "big_*" step one (50000,) tensor (above the OpenMP threshold) with random gradients;
"sched_*" are LambdaLR values alone; "clip_*" are clip_grad_norm_ on random gradients."""
import math

import torch
from qkvref import Refs

STEPS = 20
NAMES = ["w1", "b1", "w2", "b2"]


def noam(d_model, warmup, factor):
    return lambda s: factor * d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5)


def warmup_cosine(base, warmup, total, min_lr):
    def f(s):
        if s <= warmup:
            return base * s / warmup
        if s >= total:
            return min_lr
        return min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
    return f


def inverse_sqrt(base, warmup):
    return lambda s: base * s / warmup if s <= warmup else base * math.sqrt(warmup / s)


def make_opt(cfg, groups):
    kind = cfg["opt"]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=cfg["lr"], momentum=cfg["momentum"], dampening=cfg["dampening"],
                               nesterov=cfg["nesterov"], weight_decay=cfg["weight_decay"])
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
               weight_decay=cfg["weight_decay"], amsgrad=cfg["amsgrad"])


def make_lambda(s):
    if s is None:
        return None
    if s["type"] == "noam":
        return noam(s["d_model"], s["warmup"], s["factor"])
    if s["type"] == "warmup_cosine":
        return warmup_cosine(s["lr"], s["warmup"], s["total"], s["min_lr"])
    return inverse_sqrt(s["lr"], s["warmup"])


def sgd(lr, momentum=0.0, dampening=0.0, nesterov=False, wd=0.0):
    return {"opt": "sgd", "lr": lr, "momentum": momentum, "dampening": dampening, "nesterov": nesterov,
            "weight_decay": wd}


def adam(kind, lr, wd, amsgrad=False, betas=(0.9, 0.999), eps=1e-8):
    return {"opt": kind, "lr": lr, "beta1": betas[0], "beta2": betas[1], "eps": eps, "weight_decay": wd,
            "amsgrad": amsgrad}


NOAM = {"type": "noam", "d_model": 32, "warmup": 6, "factor": 0.5}
COSINE = {"type": "warmup_cosine", "lr": 0.02, "warmup": 5, "total": 20, "min_lr": 0.001}
COSINE_SGD = {"type": "warmup_cosine", "lr": 0.2, "warmup": 4, "total": 18, "min_lr": 0.0}
INVSQRT = {"type": "inverse_sqrt", "lr": 0.01, "warmup": 4}

CASES = {
    "sgd_plain": (sgd(0.1), None, None),
    "sgd_momentum_wd": (sgd(0.1, momentum=0.9, wd=0.01), None, None),
    "sgd_dampening": (sgd(0.05, momentum=0.8, dampening=0.3, wd=0.001), None, None),
    "sgd_nesterov_wd": (sgd(0.1, momentum=0.9, nesterov=True, wd=0.01), None, None),
    "sgd_nesterov_clip_cosine": (sgd(1.0, momentum=0.9, nesterov=True, wd=0.01), 0.5, COSINE_SGD),
    "adam": (adam("adam", 0.01, 0.0), None, None),
    "adam_l2": (adam("adam", 0.01, 0.01), None, None),
    "adam_amsgrad_clip": (adam("adam", 0.01, 0.01, amsgrad=True, betas=(0.8, 0.99)), 0.3, None),
    "adam_noam": (adam("adam", 1.0, 0.0, betas=(0.9, 0.98), eps=1e-9), None, NOAM),
    "adamw": (adam("adamw", 0.01, 0.1), None, None),
    "adamw_clip": (adam("adamw", 0.01, 0.1), 0.3, None),
    "adamw_noam_clip": (adam("adamw", 1.0, 0.1, betas=(0.9, 0.98), eps=1e-9), 0.5, NOAM),
    "adamw_cosine": (adam("adamw", 1.0, 0.05), None, COSINE),
    "adamw_cosine_clip": (adam("adamw", 1.0, 0.05), 0.3, COSINE),
    "adamw_invsqrt_amsgrad": (adam("adamw", 1.0, 0.05, amsgrad=True), None, INVSQRT),
}


def train_case(r, name, cfg, clip, sched, net):
    x, y = net["x"], net["y"]
    p = {n: net[n].clone().requires_grad_(True) for n in NAMES}
    groups = [{"params": [p["w1"], p["w2"]]}, {"params": [p["b1"], p["b2"]], "weight_decay": 0.0}]
    opt = make_opt(cfg, groups)
    fn = make_lambda(sched)
    lam = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: fn(e + 1)) if fn else None
    rec = {f"g_{n}": [] for n in NAMES} | {f"p_{n}": [] for n in NAMES}
    lrs, norms, losses = [], [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        h = torch.tanh(torch.nn.functional.linear(x, p["w1"], p["b1"]))  # (16, 32)
        out = torch.nn.functional.linear(h, p["w2"], p["b2"])           # (16, 4)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        for n in NAMES:
            rec[f"g_{n}"].append(p[n].grad.clone())
        if clip is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_([p[n] for n in ["w1", "w2", "b1", "b2"]], clip)))
        else:
            norms.append(float(torch.norm(torch.stack([torch.norm(p[n].grad) for n in NAMES]))))
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(float(loss))
        opt.step()
        if lam:
            lam.step()
        for n in NAMES:
            rec[f"p_{n}"].append(p[n].detach().clone())
    params = dict(cfg, clip=clip, schedule=sched, steps=STEPS)
    tensors = {k: torch.stack(v) for k, v in rec.items()}
    r.case(name, params, lr=torch.tensor(lrs, dtype=torch.float64), norm=torch.tensor(norms, dtype=torch.float64),
           loss=torch.tensor(losses, dtype=torch.float64), **tensors)


def big_cases(r, g):
    """One large tensor (OpenMP path), 3 steps with random gradients; f32 and f64."""
    configs = {"sgd": sgd(0.1, momentum=0.9, nesterov=True, wd=0.01), "adam": adam("adam", 0.01, 0.01),
               "adamw": adam("adamw", 0.01, 0.1, amsgrad=True)}
    for dtype, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
        for name, cfg in configs.items():
            p0 = torch.randn(50000, generator=g, dtype=dtype)
            grads = torch.randn(3, 50000, generator=g, dtype=dtype)
            p = p0.clone().requires_grad_(True)
            opt = make_opt(cfg, [{"params": [p]}])
            after = []
            for s in range(3):
                p.grad = grads[s].clone()
                opt.step()
                after.append(p.detach().clone())
            r.case(f"big_{name}_{tag}", dict(cfg, dtype=tag), p0=p0, grads=grads, after=torch.stack(after))


def schedule_cases(r):
    for name, sched, n in [("noam", {"type": "noam", "d_model": 512, "warmup": 4000, "factor": 2.0}, 12000),
                           ("warmup_cosine", {"type": "warmup_cosine", "lr": 5e-4, "warmup": 100, "total": 1000,
                                              "min_lr": 1e-5}, 1200),
                           ("warmup_cosine_nowarm", {"type": "warmup_cosine", "lr": 1e-3, "warmup": 0, "total": 50,
                                                     "min_lr": 0.0}, 60),
                           ("inverse_sqrt", {"type": "inverse_sqrt", "lr": 1e-3, "warmup": 50}, 500)]:
        w = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([w], lr=1.0)
        fn = make_lambda(sched)
        lam = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: fn(e + 1))
        lrs = []
        for _ in range(n):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            lam.step()
        r.case(f"sched_{name}", sched, lr=torch.tensor(lrs, dtype=torch.float64))


def clip_cases(r, g):
    shapes = [(7, 5), (40000,), (3,), (6, 2, 4)]  # (40000,) is above the OpenMP threshold
    for max_norm in [0.5, 1e6]:
        for dtype, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
            ps = [torch.zeros(s, dtype=dtype, requires_grad=True) for s in shapes]
            gs = [torch.randn(s, generator=g, dtype=dtype) * 0.01 for s in shapes]
            for p, gr in zip(ps, gs):
                p.grad = gr.clone()
            total = torch.nn.utils.clip_grad_norm_(ps, max_norm)
            r.case(f"clip_{'clips' if max_norm < 1 else 'noop'}_{tag}",
                   {"max_norm": max_norm, "n": len(shapes), "dtype": tag},
                   total=torch.tensor([float(total)], dtype=torch.float64),
                   **{f"g{i}": gr for i, gr in enumerate(gs)}, **{f"out{i}": p.grad for i, p in enumerate(ps)})


def main(out):
    g = torch.Generator().manual_seed(20)
    r = Refs()
    net = {"x": torch.randn(16, 8, generator=g), "y": torch.randn(16, 4, generator=g),
           "w1": torch.randn(32, 8, generator=g) * 8 ** -0.5, "b1": torch.randn(32, generator=g) * 0.1,
           "w2": torch.randn(4, 32, generator=g) * 32 ** -0.5, "b2": torch.randn(4, generator=g) * 0.1}
    r.case("net", {"steps": STEPS}, **net)
    for name, (cfg, clip, sched) in CASES.items():
        train_case(r, name, cfg, clip, sched, net)
    big_cases(r, g)
    schedule_cases(r)
    clip_cases(r, g)
    r.save(out)
