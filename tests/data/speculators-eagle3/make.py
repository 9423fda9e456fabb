#!/usr/bin/env python3
"""Makes tests/data/speculators-eagle3: a random EAGLE-3 head saved by vLLM's `speculators` library
(PyPI speculators 0.9.0, its Eagle3DraftModel.save_pretrained: config.json with
speculators_model_type "eagle3", the layer under transformer_layer_config, norm_before_residual
and norm_before_fc true, the target's embed_tokens.weight copied in; the config.py it writes for auto_map removed), for ../shared/fixtures/qwen3-tiny as the target,
and expected.json: the draft's first-step logits at the prompt's last position and its greedy chain,
computed by speculators' own modules (its fc, Eagle3 first decoder layer, norm and lm_head; eager
attention, float32) with the target's hidden states from transformers.

  python make.py   (with torch, transformers and speculators importable; ../shared beside the checkout)
"""
import json
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig
from speculators.config import SpeculatorsConfig, VerifierConfig
from speculators.models.eagle3 import Eagle3SpeculatorConfig
from speculators.models.eagle3.core import Eagle3DraftModel
from speculators.proposals.greedy import GreedyTokenProposalConfig

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures", "qwen3-tiny")
AUX = [1, 3, 6]  # HF hidden_states ids (entering layer i; 6 = the last layer's output)
# 6 is hidden_states[6] of the 6-layer target, the post-final-norm output: ears-bench now refuses it as a
# head's aux id (no runtime captures it), so SpeculatorsHeadMatchesSpeculators loads a copy of this head
# naming [1, 3, 5] and feeds these features itself. A regenerated head should use [1, 3, 5].
PROMPT = [5, 17, 42, 8, 99, 3, 250, 61, 7, 12]
CHAIN = 4

torch.manual_seed(1234)
target = AutoModelForCausalLM.from_pretrained(TARGET, torch_dtype=torch.float32, attn_implementation="eager").eval()
tc = target.config
layer = LlamaConfig(vocab_size=tc.vocab_size, hidden_size=tc.hidden_size, intermediate_size=96, num_hidden_layers=1,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
                    rope_theta=500000.0, max_position_embeddings=512)
layer._attn_implementation = "eager"
config = Eagle3SpeculatorConfig(
    transformer_layer_config=layer, draft_vocab_size=48, norm_before_residual=True, norm_before_fc=True,
    target_hidden_size=tc.hidden_size, eagle_aux_hidden_state_layer_ids=AUX,
    speculators_config=SpeculatorsConfig(
        algorithm="eagle3", default_proposal_method="greedy",
        proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=3)],
        verifier=VerifierConfig(name_or_path="qwen3-tiny", architectures=["Qwen3ForCausalLM"])))
head = Eagle3DraftModel(config).eval()
used = torch.sort(torch.randperm(tc.vocab_size)[:48]).values
t2d = torch.zeros(tc.vocab_size, dtype=torch.bool)
t2d[used] = True
head.load_vocab_mappings(t2d, used - torch.arange(48))
with torch.no_grad():
    for name, p in head.named_parameters():
        p.normal_(0, 0.08) if p.dim() > 1 else p.uniform_(0.6, 1.4)
    head.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
head.save_pretrained(HERE)
os.remove(os.path.join(HERE, "config.py"))  # speculators' own config class (auto_map): not ours to ship

with torch.no_grad():
    ids = torch.tensor([PROMPT])
    out = target(ids, output_hidden_states=True)
    x_last = int(out.logits[0, -1].argmax())
    feats = torch.cat([out.hidden_states[a] for a in AUX], -1)  # [1, L, 3 * hidden]
    tokens = torch.tensor([PROMPT[1:] + [x_last]])  # draft position t: feature t with token t + 1
    cache = DynamicCache()
    first = head.layers[0]

    def step(hidden, toks, start):
        pos = torch.arange(start, start + toks.shape[1]).unsqueeze(0)
        x = torch.cat([head.embed_tokens(toks), hidden], -1)
        h = first(x, attention_mask=causal(toks.shape[1], start), position_ids=pos, past_key_values=cache,
                  use_cache=True, cache_position=pos[0], position_embeddings=head.rotary_emb(x, pos))
        return h, head.lm_head(head.norm(h))

    def causal(n, start):  # [1, 1, n, start + n] additive mask: query i sees keys <= start + i
        q = torch.arange(start, start + n).unsqueeze(1)
        k = torch.arange(start + n).unsqueeze(0)
        return torch.where(k <= q, 0.0, float("-inf")).view(1, 1, n, start + n)

    h, logits = step(head.fc(head.input_norm(feats)), tokens, 0)  # norm_before_fc
    logits_last = logits[0, -1]
    chain, chain_logits, prenorm, L = [], [], h[:, -1:], len(PROMPT)
    nxt = logits_last
    for j in range(CHAIN + 1):
        tid = int(head.d2t[int(nxt.argmax())]) + int(nxt.argmax())
        chain.append(tid)
        if j == CHAIN:
            break
        prenorm, lg = step(prenorm, torch.tensor([[tid]]), L + j)
        nxt = lg[0, -1]
        chain_logits.append([float(v) for v in nxt])
json.dump({"prompt_ids": PROMPT, "target_next_id": x_last, "aux_layers": AUX,
           "logits_last": [float(v) for v in logits_last], "chain_target_ids": chain,
           "chain_logits": chain_logits,
           "reference": "speculators 0.9.0 Eagle3DraftModel modules, eager attention, float32 (make.py)"},
          open(os.path.join(HERE, "expected.json"), "w"), indent=1)
print("x_last", x_last, "chain", chain)
