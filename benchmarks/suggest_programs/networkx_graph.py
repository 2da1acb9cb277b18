"""networkx: centrality, PageRank, components and shortest paths on a random graph, written at
module level (ranges come from networkx's functions)."""

import time

import networkx as nx
import nvtx

# benchmarks/blocks.py gives it (under callgrind: a counter dump at each edge of the section).
section_edge = globals().get("section_edge") or (lambda: None)

graph = nx.gnm_random_graph(2000, 8000, seed=1)
section = nvtx.start_range("section", domain="bench")
section_edge()
started, cpu_started = time.perf_counter(), time.process_time()
ranks = nx.pagerank(graph)
between = nx.betweenness_centrality(graph, k=60, seed=1)
components = list(nx.connected_components(graph))
lengths = dict(nx.single_source_shortest_path_length(graph, 0))
clustering = nx.average_clustering(graph)
section_edge()
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
nvtx.end_range(section)
print(f"section_s={elapsed:.6f} section_cpu_s={cpu:.6f} components={len(components)} clustering={clustering:.4f}")
