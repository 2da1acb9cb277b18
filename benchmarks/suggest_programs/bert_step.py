"""A BERT training step on the CPU with random weights (transformers, torch): the loop is written
at module level, so whatever ranges it gets come from the libraries' functions, not ours."""

import sys
import time

import nvtx

# benchmarks/blocks.py gives it (under callgrind: a counter dump at each edge of the section).
section_edge = globals().get("section_edge") or (lambda: None)
import torch
from transformers import BertConfig, BertForSequenceClassification

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
# "small": a BERT a tenth of the size whose step makes as many calls in a few milliseconds, so
# that the same ranges weigh ten times more against it (benchmarks/budget.py --small).
SMALL = sys.argv[2:] == ["small"]
torch.manual_seed(0)
torch.set_num_threads(1)
if SMALL:
    config = BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=2, intermediate_size=128
    )
    batch, length = 2, 16
else:
    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    batch, length = 8, 128
model = BertForSequenceClassification(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batches = [
    (torch.randint(0, config.vocab_size, (batch, length)), torch.randint(0, 2, (batch,))) for _ in range(STEPS + 1)
]

steps_cpu = []  # each step's CPU time after the first: benchmarks/budget.py takes their median
for number, (ids, labels) in enumerate(batches):
    if number == 1:  # the first step warms up; the section is the steps after it
        section = nvtx.start_range("section", domain="bench")
        section_edge()
        started, cpu_started = time.perf_counter(), time.process_time()
    step_started = time.process_time()
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if number:
        steps_cpu.append(time.process_time() - step_started)
section_edge()
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
nvtx.end_range(section)
print(f"section_s={elapsed:.6f} section_cpu_s={cpu:.6f} loss={loss.item():.4f}")
print("steps_cpu_s=" + ",".join(f"{s:.6f}" for s in steps_cpu))
