"""Train the demo qwen35moe model on the encoded corpus (CPU, PyTorch), deterministically for a given step count.

Each batch row is a window that starts at a document start (so the model sees conversations from position 0, as at
inference) and runs on across the following documents. AdamW, linear warm-up then cosine decay, next-token
cross-entropy plus a small router load-balancing loss.

    python tools/demo_model/train.py --data build/demo_model --steps 1400 --out build/demo_model/model.pt
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_torch import Config, Qwen35MoE  # noqa: E402


def document_starts(ids: np.ndarray, separator: int) -> np.ndarray:
    starts = np.concatenate([[0], np.nonzero(ids == separator)[0] + 1])
    return starts[starts < len(ids) - 2]


def batch(ids, starts, rng, rows, length):
    picks = rng.choice(starts, size=rows)
    picks = np.minimum(picks, len(ids) - length - 1)
    x = np.stack([ids[s:s + length + 1] for s in picks]).astype(np.int64)
    return torch.from_numpy(x[:, :-1]), torch.from_numpy(x[:, 1:])


def lr_at(step, steps, peak, warmup, time_done=0.0):
    """Linear warm-up, then cosine decay to 10 % of the peak over the rest of the run; the run's progress is the
    larger of steps done and time_done (the fraction of a time budget spent), so a run cut by time ends decayed."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, max((step - warmup) / max(1, steps - warmup), time_done))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with tokenizer.json and tokens.npy (bpe_train.py)")
    ap.add_argument("--out", required=True, help="checkpoint to write (.pt)")
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--balance", type=float, default=0.01, help="weight of the router load-balancing loss")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--max-seconds", type=float, default=0, help="stop early (and save) after this long; 0: never")
    ap.add_argument("--lr-by-time", action="store_true",
                    help="decay the learning rate over --max-seconds as well as over --steps (whichever ends first)")
    ap.add_argument("--config", default="{}", help="JSON overrides of model_torch.Config fields")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    data = Path(args.data)
    tok = json.loads((data / "tokenizer.json").read_text(encoding="utf-8"))
    ids = np.load(data / "tokens.npy")
    starts = document_starts(ids, tok["special_ids"]["<|endoftext|>"])
    cfg = Config(n_vocab=len(tok["tokens"]), **json.loads(args.config))
    model = Qwen35MoE(cfg).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model {n_params / 1e6:.2f} M parameters; corpus {len(ids)} tokens, {len(starts)} documents",
          file=sys.stderr)

    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices; not norms, biases, decays, gates
    keep = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": keep, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    if args.lr_by_time and not args.max_seconds:
        ap.error("--lr-by-time needs --max-seconds")
    log, smooth, t0 = [], None, time.time()

    def save(step):
        torch.save({"config": cfg.to_dict(), "state": model.state_dict(), "step": step, "log": log,
                    "args": vars(args), "seconds": time.time() - t0}, args.out)

    for step in range(args.steps):
        for group in opt.param_groups:
            time_done = (time.time() - t0) / args.max_seconds if args.lr_by_time and args.max_seconds else 0.0
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup, time_done)
        x, y = (t.to(args.device) for t in batch(ids, starts, rng, args.batch, args.length))
        logits, balance = model(x)
        ce = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), y.reshape(-1))
        loss = ce + args.balance * balance
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = ce.item() if smooth is None else 0.98 * smooth + 0.02 * ce.item()
        if step % 25 == 0 or step == args.steps - 1:
            log.append({"step": step, "ce": round(ce.item(), 4), "ce_smooth": round(smooth, 4),
                        "lr": round(opt.param_groups[0]["lr"], 6),
                        "balance": round(balance.item(), 4), "seconds": round(time.time() - t0, 1)})
            print(json.dumps(log[-1]), file=sys.stderr, flush=True)
        if (step + 1) % args.save_every == 0:
            save(step + 1)
        if args.max_seconds and time.time() - t0 > args.max_seconds:
            print(f"stopping early at step {step + 1}: --max-seconds {args.max_seconds} reached", file=sys.stderr)
            break
    save(step + 1)
    print(f"done: {step + 1} steps in {time.time() - t0:.0f} s, final smoothed loss {smooth:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
