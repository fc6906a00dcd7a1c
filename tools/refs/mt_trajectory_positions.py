"""Reference for tests/mt/test_trajectory.cpp (Trajectory.RelativeAndRotaryPositions): 40 training
steps of the relative-position and the rotary Transformer (models_transformer.PosTransformer, plain
torch from Shaw et al. 2018 and Su et al. 2021) with mt_trajectory.py's recipe: Adam (betas 0.9,
0.98, eps 1e-6), the Noam schedule, label-smoothed (0.1) cross-entropy over non-pad targets,
global-norm clipping at 1.0, dropout 0. Per case: the initial parameters (qkv names), the 10 batches
cycled through, the loss at every step in fp32 and in fp64, and the parameters after the last step
of both runs ("final.<name>", "final64.<name>")."""
import torch
import torch.nn.functional as F
from models_transformer import PosTransformer, randomize, padding_mask
from mt_trajectory import B, CLIP, EPS, FACTOR, LS, NBATCH, S, T, WARMUP
from qkvref import Refs

STEPS = 40
BASE = dict(src_vocab=29, tgt_vocab=29, d_model=32, heads=4, enc_layers=2, dec_layers=2, d_ff=64,
            activation="relu", pre_norm=False, shared_embeddings=True, tie_output=True, scale_embeddings=True,
            dropout=0.0, attention_dropout=0.0, max_len=16, pad_id=0, bos_id=1, eos_id=2)
CASES = {"relative": dict(BASE, positional="relative", relative_clip=3),
         "rope": dict(BASE, positional="rope", rope_base=10000.0, rope_style="interleaved", pre_norm=True)}


def noam(cfg, step):
    return FACTOR * cfg["d_model"] ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


def run(cfg, dtype):
    """The run in `dtype`; returns (initial params, batches, losses, final params)."""
    g = torch.Generator().manual_seed(19)
    torch.manual_seed(7)
    m = PosTransformer(cfg)
    randomize(m.encoder, g)
    randomize(m.decoder, g)
    with torch.no_grad():
        m.src_embed.weight.mul_(0.3)
        m.src_embed.weight[cfg["pad_id"]] = 0
    init = {k: v.detach().clone() for k, v in m.named_qkv(lambda p: p).items()}
    batches = []
    for i in range(NBATCH):
        src_pad = padding_mask(B, S, g, min_len=2)
        src = torch.randint(3, cfg["src_vocab"], (B, S), generator=g).masked_fill(src_pad, 0)
        lens = torch.randint(2, T + 1, (B,), generator=g)
        body = torch.randint(3, cfg["tgt_vocab"], (B, T), generator=g)
        tgt_out = body.clone()
        for b in range(B):
            tgt_out[b, lens[b] - 1] = cfg["eos_id"]
            tgt_out[b, lens[b]:] = 0
        tgt_in = torch.cat([torch.full((B, 1), cfg["bos_id"]), tgt_out[:, :-1]], 1).masked_fill(tgt_out == 0, 0)
        batches.append((src, src_pad, tgt_in, tgt_out))
    m = m.to(dtype)
    params = list(m.parameters())
    opt = torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=EPS)
    losses = []
    for step in range(1, STEPS + 1):
        src, src_pad, tgt_in, tgt_out = batches[(step - 1) % NBATCH]
        opt.zero_grad(set_to_none=True)
        logits = m(src, src_pad, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, cfg["tgt_vocab"]), tgt_out.reshape(-1), ignore_index=0,
                               label_smoothing=LS)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        for grp in opt.param_groups:
            grp["lr"] = noam(cfg, step)
        opt.step()
        losses.append(loss.item())
    return init, batches, losses, {k: v.detach().clone() for k, v in m.named_qkv(lambda p: p).items()}


def main(out):
    r = Refs()
    for name, cfg in CASES.items():
        init, batches, losses, final = run(cfg, torch.float32)
        _, _, losses64, final64 = run(cfg, torch.float64)
        tensors = {"losses": torch.tensor(losses, dtype=torch.float64),
                   "losses64": torch.tensor(losses64, dtype=torch.float64)}
        for k, v in init.items():
            tensors["init." + k] = v
        for k, v in final.items():
            tensors["final." + k] = v.float()
            tensors["final64." + k] = final64[k].double()
        for i, (src, src_pad, tgt_in, tgt_out) in enumerate(batches):
            tensors[f"src{i}"], tensors[f"pad{i}"] = src, src_pad.to(torch.uint8)
            tensors[f"tin{i}"], tensors[f"tout{i}"] = tgt_in, tgt_out
        r.case(name, {"config": cfg, "steps": STEPS, "batches": NBATCH, "warmup": WARMUP, "factor": FACTOR,
                      "label_smoothing": LS, "clip": CLIP, "eps": EPS}, **tensors)
    r.save(out)
