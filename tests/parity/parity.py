#!/usr/bin/env python3
"""Parity of ears-bench with the libraries that define the formats (the `parity` ctest label,
registered by the torch2 build: `make test-torch2`).

  parity.py models     random tiny Qwen3 / Qwen2 / Llama checkpoints created and saved by
                       transformers itself (GQA, tied and untied embeddings, biases, fp32 and bf16,
                       sharded saves): `ears-bench forward` logits vs transformers eager within the
                       fixture tolerances (../shared/fixtures/README.md), greedy continuations equal
  parity.py tokenizer  the real Qwen3 tokenizer.json through HF `tokenizers` vs `ears-bench tokenize
                       --jsonl` on every question and answer of ../shared/datasets (GSM8K, NQ-open,
                       Spec-Bench): ids equal, decode round trips equal
  parity.py bundled    models/tiny-qwen3 loaded by transformers as Qwen3ForCausalLM: its logits match
                       ours (what we ship is a standard checkpoint)

Exit 0 pass, 1 fail (each failure printed), 77 skipped (../shared missing). EARS_BENCH_EXE names
the executable; EARS_PARITY_PLANT=1 perturbs our logits by 1e-3 to prove the checks can fail.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
EXE = os.environ.get("EARS_BENCH_EXE", os.path.join(ROOT, "build-torch2", "ears-bench"))
# ../shared/fixtures/README.md: fp32 logits within 1e-4; bf16 (HF eager vs fused kernels)
# within 0.75 max / 0.15 mean absolute, the bounds model_tests apply to the bf16 fixture.
TOL = {"float32": {"max": 1e-4, "mean": 1e-4}, "bfloat16": {"max": 0.75, "mean": 0.15}}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def ears(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ears-bench {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def ears_logits(model_dir, ids, dtype):
    out = json.loads(ears("forward", "--model", model_dir, "--ids", " ".join(map(str, ids)),
                          "--last", str(len(ids)), "--dtype", dtype, "--threads", "1"))
    logits = np.array(out["logits"], dtype=np.float64)
    if os.environ.get("EARS_PARITY_PLANT") == "1":
        logits[:, 0] += 1e-3
    return logits


def ears_greedy(model_dir, ids, dtype, n):
    out = json.loads(ears("generate", "--target", model_dir, "--ids", " ".join(map(str, ids)), "--temperature", "0",
                          "--max-new-tokens", str(n), "--dtype", dtype, "--threads", "1", "--json"))
    return out["ids"]


def hf_logits_and_greedy(model, ids, n):
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(x).logits[0].float().numpy().astype(np.float64)
        gen = model.generate(x, max_new_tokens=n, do_sample=False, pad_token_id=0)[0, len(ids):].tolist()
        # top1 - top2 margin of each greedy step (teacher-forced), to tell near-ties in bf16 apart
        full = model(torch.tensor([ids + gen])).logits[0, len(ids) - 1:].float()
    top2 = torch.topk(full, 2, dim=-1).values
    return logits, gen, (top2[:, 0] - top2[:, 1]).tolist()


def compare_logits(name, ours, theirs, dtype):
    diff = np.abs(ours - theirs)
    tol = TOL[dtype]
    check(diff.max() <= tol["max"] and diff.mean() <= tol["mean"],
          f"{name}: logits max |diff| {diff.max():.3g} (<= {tol['max']}), mean {diff.mean():.3g} (<= {tol['mean']})")
    return float(diff.max())


def compare_greedy(name, ours, theirs, margins, dtype, logit_diff):
    if dtype == "float32":
        check(ours == theirs, f"{name}: greedy continuation {ours} == transformers {theirs}")
        return
    # bf16 rounds differently (fused fp32 accumulation vs HF's per-op bf16): equal up to the first
    # near-tie, a step whose top1 - top2 margin is within twice the logits' measured difference.
    k = next((i for i, m in enumerate(margins[:len(theirs)]) if m <= 2 * logit_diff), len(theirs))
    check(k >= min(4, len(theirs)) and ours[:k] == theirs[:k],
          f"{name}: greedy continuation equal for the {k} steps before a near-tie ({ours[:k]} vs {theirs[:k]})")


VARIANTS = [
    # name, config class, extra config, dtype, max_shard_size
    ("qwen3-gqa-untied-fp32", "Qwen3Config", {"tie_word_embeddings": False}, "float32", None),
    ("qwen3-tied-bf16-sharded", "Qwen3Config", {"tie_word_embeddings": True}, "bfloat16", "60KB"),
    ("qwen2-bias-untied-fp32-sharded", "Qwen2Config", {"tie_word_embeddings": False}, "float32", "100KB"),
    ("qwen2-tied-bf16", "Qwen2Config", {"tie_word_embeddings": True}, "bfloat16", None),
    ("llama-gqa-untied-fp32", "LlamaConfig", {"tie_word_embeddings": False, "rope_theta": 10000.0}, "float32", None),
    ("llama-bias-tied-bf16-sharded", "LlamaConfig",
     {"tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True}, "bfloat16", "80KB"),
]


def cmd_models():
    rng = np.random.default_rng(7)
    for i, (name, cls, extra, dtype, shard) in enumerate(VARIANTS):
        torch.manual_seed(100 + i)
        cfg = getattr(transformers, cls)(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                         max_position_embeddings=128, rms_norm_eps=1e-6, eos_token_id=255,
                                         bos_token_id=0, **extra)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        with torch.no_grad():  # larger weights than the default init, so logits are not all ~0
            for p in model.parameters():
                p.mul_(4.0) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.1)
        model = model.to(getattr(torch, dtype)).eval()
        with tempfile.TemporaryDirectory() as d:
            model.save_pretrained(d, max_shard_size=shard or "1GB")
            files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
            if shard:
                check(len(files) > 1, f"{name}: saved as {len(files)} shards")
            ids = rng.integers(1, 255, size=12).tolist()
            theirs, gen, margins = hf_logits_and_greedy(model, ids, 8)
            diff = compare_logits(name, ears_logits(d, ids, dtype), theirs, dtype)
            compare_greedy(name, ears_greedy(d, ids, dtype, 8), gen, margins, dtype, diff)


def dataset_strings():
    out = []
    for rel, fields in [("gsm8k/test.jsonl", ("question", "answer")), ("gsm8k/train.jsonl", ("question", "answer")),
                        ("nq_open/NQ-open.dev.jsonl", ("question", "answer")),
                        ("spec_bench/question.jsonl", ("turns", "reference"))]:
        with open(os.path.join(SHARED, "datasets", rel), encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                for k in fields:
                    v = rec.get(k)
                    out.extend(v if isinstance(v, list) else [v] if v is not None else [])
    return [s for s in out if isinstance(s, str)]


def cmd_tokenizer():
    from tokenizers import Tokenizer
    path = os.path.join(SHARED, "tokenizers", "qwen3", "tokenizer.json")
    hf = Tokenizer.from_file(path)
    strings = dataset_strings()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
    lines = ears("tokenize", "--tokenizer", path, "--jsonl", f.name).rstrip("\n").split("\n")  # not splitlines(): U+2028 is text here
    os.unlink(f.name)
    check(len(lines) == len(strings), f"tokenizer: {len(lines)} outputs for {len(strings)} strings")
    bad_ids = bad_text = 0
    for s, line in zip(strings, lines):
        ours = json.loads(line)
        want = hf.encode(s, add_special_tokens=False).ids
        if os.environ.get("EARS_PARITY_PLANT") == "1" and s is strings[0]:
            want = want + [0]
        if ours["ids"] != want:
            bad_ids += 1
            if bad_ids <= 3:
                print(f"  ids differ for {s[:80]!r}: ours {ours['ids'][:12]} hf {want[:12]}")
        if ours["decoded"] != hf.decode(want, skip_special_tokens=False):
            bad_text += 1
    check(bad_ids == 0, f"tokenizer: ids equal to HF tokenizers on {len(strings)} dataset strings ({bad_ids} differ)")
    check(bad_text == 0, f"tokenizer: decode round trips equal on {len(strings)} strings ({bad_text} differ)")


def cmd_bundled():
    d = os.path.join(ROOT, "models", "tiny-qwen3")
    model = transformers.Qwen3ForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
    check(type(model).__name__ == "Qwen3ForCausalLM", "bundled: models/tiny-qwen3 loads as Qwen3ForCausalLM")
    ids = [1, 17, 300, 42, 1999, 5, 640, 77]
    theirs, gen, margins = hf_logits_and_greedy(model, ids, 8)
    diff = compare_logits("bundled tiny-qwen3 (fp32 compute)", ears_logits(d, ids, "float32"), theirs, "float32")
    compare_greedy("bundled tiny-qwen3", ears_greedy(d, ids, "float32", 8), gen, margins, "float32", diff)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("models", "tokenizer", "bundled"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "tokenizer" and not os.path.isdir(os.path.join(SHARED, "datasets")):
        print(f"skipped: {SHARED} not found")
        return 77
    torch.set_num_threads(1)
    {"models": cmd_models, "tokenizer": cmd_tokenizer, "bundled": cmd_bundled}[sys.argv[1]]()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
