#!/usr/bin/env python3
"""FAISS IndexFlatIP (IndexFlatL2 for l2) searched by many Python threads at
once, one query per call, the way cmd/bench --concurrency calls umbra's
Search from many goroutines.

For each level in --threads, that many threads each call index.search with
one (1, dim) query in a loop for --duration seconds (thread i starts at
query i and takes the queries in turn); FAISS releases the GIL inside
search, so the calls run in parallel. Under cosine the query is normalised
inside the timed call, as umbra's Search does. Prints one JSON object.
"""
import argparse
import json
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--metric", choices=["cosine", "dot", "l2"], default="cosine")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--threads", required=True, help="comma list, e.g. 1,8,64")
    p.add_argument("--duration", type=float, default=2.0)
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
    index = faiss.IndexFlatL2(x.shape[1]) if a.metric == "l2" else faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    del x
    qs = load(a.queries)

    def one(i):
        q = np.array(qs[i % len(qs)], dtype=np.float32).reshape(1, -1)
        if cosine:
            faiss.normalize_L2(q)
        index.search(q, a.k)

    levels = []
    for n in [int(t) for t in a.threads.split(",")]:
        lat = [[] for _ in range(n)]
        end = time.perf_counter() + a.duration

        def worker(t):
            j = t
            mine = lat[t]
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                one(j)
                mine.append(time.perf_counter() - t0)
                j += 1

        start = time.perf_counter()
        ths = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        elapsed = time.perf_counter() - start
        allv = sorted(v for l in lat for v in l)

        def pct(p):
            if not allv:
                return float("nan")
            i = max(min(int(-(-p * len(allv) // 1)) - 1, len(allv) - 1), 0)
            return allv[i] * 1e3

        levels.append({"threads": n, "searches": len(allv), "qps": len(allv) / elapsed,
                       "p50_ms": pct(0.50), "p99_ms": pct(0.99)})
    json.dump({"faiss_version": faiss.__version__, "index": type(index).__name__,
               "omp_threads": faiss.omp_get_max_threads(), "levels": levels}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
