"""scikit-learn: a scaled, PCA-reduced logistic regression and a random forest fitted and scored
on synthetic data, written at module level (ranges come from scikit-learn's functions)."""

import time

import nvtx

# benchmarks/blocks.py gives it (under callgrind: a counter dump at each edge of the section).
section_edge = globals().get("section_edge") or (lambda: None)
from sklearn.datasets import make_classification
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

X, y = make_classification(n_samples=4000, n_features=40, n_informative=12, random_state=0)
section = nvtx.start_range("section", domain="bench")
section_edge()
started, cpu_started = time.perf_counter(), time.process_time()
pipeline = make_pipeline(StandardScaler(), PCA(n_components=20), LogisticRegression(max_iter=500))
scores = cross_val_score(pipeline, X, y, cv=4)
forest = RandomForestClassifier(n_estimators=30, max_depth=10, random_state=0, n_jobs=1).fit(X, y)
accuracy = forest.score(X, y)
section_edge()
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
nvtx.end_range(section)
print(f"section_s={elapsed:.6f} section_cpu_s={cpu:.6f} cv={scores.mean():.3f} forest={accuracy:.3f}")
