"""The BERT step of suggest_programs/bert_step.py, timed in one process in blocks that take
turns: no ranges, `install(targets=["transformers.*"], budget=PCT)`, and the same without a
budget. benchmarks/budget.py runs it under the recorder (`autonvtx run --summary=...` attaches
it); it prints one JSON line per block.

    autonvtx run --summary=s.json benchmarks/budget_blocks.py ROUNDS STEPS PCT

Blocks taking turns in one process see the same host: a shared machine's slow minutes fall on
every arm alike, which runs in separate processes cannot promise. Each block installs (the
walk is outside the timing), runs one step untimed (the budget measures each function's first
calls there: the cost of measuring is in the process-level figures of benchmarks/budget.py),
then times STEPS steps on the main thread's CPU clock; the installation ends before the next
block.
"""

import json
import sys
import time

import torch
from transformers import BertConfig, BertForSequenceClassification

import autonvtx

ROUNDS, STEPS, BUDGET = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
torch.manual_seed(0)
torch.set_num_threads(1)
config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
model = BertForSequenceClassification(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids, labels = torch.randint(0, config.vocab_size, (8, 128)), torch.randint(0, 2, (8,))


def step() -> float:
    started = time.thread_time()
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return time.thread_time() - started


step()  # warm-up, and every module the step imports is imported before the first walk
ARMS = {"plain": None, "budget": BUDGET, "unbudgeted": 0.0}
names = list(ARMS)
for round_ in range(ROUNDS):
    for arm in names[round_ % 3 :] + names[: round_ % 3]:
        budget = ARMS[arm]
        installation = None
        if budget is not None:
            installation = autonvtx.install(targets=["transformers.*"], budget=budget or None)
        step()
        times = [step() for _ in range(STEPS)]
        if installation is not None:
            installation.uninstall()
        print(json.dumps({"round": round_, "arm": arm, "steps_s": times}), flush=True)
