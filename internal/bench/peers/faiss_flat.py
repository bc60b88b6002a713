#!/usr/bin/env python3
"""Exact top-k with FAISS IndexFlatIP (IndexFlatL2 for l2), timed the way
umbra's cmd/bench times its tiers, over the same .npy files.

cmd/bench --peers writes the run's vectors and queries to temporary .npy
files and runs this script with a system Python; it can also be run by hand:

    python3 faiss_flat.py --data base.npy --queries q.npy --batch b.npy

Method (as in cmd/bench): `--warmup` untimed calls, then `--runs` groups of
`--repeat` calls, each group keeping its minimum; query i of the run is
queries[i % len(queries)], so slot by slot the same query as umbra's tiers.
The batch is one search call with every row of --batch, timed in
`--batch-runs` groups of `--batch-repeat` calls. A timed call includes
making the query a (1, dim) float32 array and, under cosine, normalising
it, as umbra's Search normalises its query; building the index (and
normalising the stored vectors) is outside timing, as umbra's Add is.

Prints one JSON object on stdout; exits 3 when faiss or numpy cannot be
imported (the object then has "error").
"""
import argparse
import json
import os
import sys
import time


def blas_libraries():
    """The BLAS and LAPACK libraries this process has loaded, resolved
    through their symlinks (Debian picks one by update-alternatives): the
    reference BLAS makes a batch search about ten times slower than
    OpenBLAS, so a report must say which one FAISS ran on. [] where
    /proc/self/maps cannot be read."""
    found = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if ("blas" in name or "mkl" in name) and path not in found:
                    found.append(path)
    except OSError:
        return []
    return sorted({os.path.realpath(p) for p in found})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="stored vectors, .npy float32 (n, dim)")
    p.add_argument("--queries", required=True, help="queries, .npy float32 (nq, dim)")
    p.add_argument("--batch", help="queries of the batch call, .npy float32 (nb, dim)")
    p.add_argument("--metric", choices=["cosine", "dot", "l2"], default="cosine")
    p.add_argument("--index", choices=["flat", "sq_fp16", "sq_8bit"], default="flat",
                   help="flat: IndexFlatIP/L2 (exact); sq_*: IndexScalarQuantizer, trained on the data (approximate)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--batch-repeat", type=int, default=2)
    p.add_argument("--batch-runs", type=int, default=5)
    a = p.parse_args()

    try:
        import numpy as np
        import faiss
    except ImportError as e:
        json.dump({"error": "cannot import faiss and numpy: %s" % e}, sys.stdout)
        return 3

    def load(path):
        return np.ascontiguousarray(np.load(path), dtype=np.float32)

    cosine = a.metric == "cosine"
    x = load(a.data)
    if cosine:
        faiss.normalize_L2(x)
    if a.index == "flat":
        index = faiss.IndexFlatL2(x.shape[1]) if a.metric == "l2" else faiss.IndexFlatIP(x.shape[1])
    else:
        qt = faiss.ScalarQuantizer.QT_fp16 if a.index == "sq_fp16" else faiss.ScalarQuantizer.QT_8bit
        mt = faiss.METRIC_L2 if a.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        index = faiss.IndexScalarQuantizer(x.shape[1], qt, mt)
        index.train(x)
    index.add(x)
    del x  # the index holds its own copy

    qs = load(a.queries)
    batch = load(a.batch) if a.batch else None

    def search(q):
        q = np.array(q, dtype=np.float32, copy=True, ndmin=2)
        if cosine:
            faiss.normalize_L2(q)
        return index.search(q, a.k)

    def grouped(call, repeat, runs):
        groups = []
        for _ in range(runs):
            best = None
            for _ in range(repeat):
                t0 = time.perf_counter_ns()
                call()
                dt = (time.perf_counter_ns() - t0) / 1e6
                best = dt if best is None else min(best, dt)
            groups.append(best)
        return groups

    for i in range(a.warmup):
        search(qs[i % len(qs)])
    slot = [0]

    def one():
        search(qs[slot[0] % len(qs)])
        slot[0] += 1

    out = {
        "faiss_version": faiss.__version__,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "omp_threads": faiss.omp_get_max_threads(),
        "blas": blas_libraries(),
        "index": type(index).__name__ + ("" if a.index == "flat" else " " + a.index[3:]),
        "normalized": cosine,
        "n": index.ntotal,
        "dim": index.d,
        "groups_ms": grouped(one, a.repeat, a.runs),
    }
    d, i = search(qs[0])
    out["top"] = {"ids": i[0].tolist(), "scores": d[0].tolist()}

    if batch is not None and len(batch):
        for _ in range(a.warmup):
            search(batch)
        out["batch_queries"] = len(batch)
        out["batch_groups_ms"] = grouped(lambda: search(batch), a.batch_repeat, a.batch_runs)
        d, i = search(batch)
        out["batch_top"] = [{"ids": i[r].tolist(), "scores": d[r].tolist()} for r in range(len(batch))]

    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
