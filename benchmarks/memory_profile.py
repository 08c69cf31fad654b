"""Where dgboost's device memory goes: the allocations live at the peak, by call site.

    python benchmarks/memory_profile.py --dataset higgs --rows 10000000 --rounds 50 --depth 8

A cupy memory hook follows every allocation from cupy's pool; for each phase
(matrix build, training, prediction) it prints the peak of live bytes, the
bytes the pool held from CUDA at the end (live plus cached), and the
allocations of 1 MiB or more that were live at the peak, grouped by the
innermost dgboost frames that made them. A diagnostic for the memory column
of side_by_side.py, not a benchmark: it reports no peer.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.datasets import TASKS, load  # noqa: E402

_PACKAGE = str(pathlib.Path(__file__).resolve().parents[1] / "dgboost")
_MIB = 2**20


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(TASKS), default="higgs")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--max-bin", type=int, default=256)
    parser.add_argument("--top", type=int, default=12, help="call sites shown per phase")
    args = parser.parse_args(argv)

    import cupy
    import dgboost

    X, y, _, _ = load(args.dataset, args.rows, 1000, "cuda")
    objective, extra, _, _ = TASKS[args.dataset]
    params = {"objective": objective, "max_depth": args.depth, "max_bin": args.max_bin, "device": "cuda",
              **extra}
    dgboost.train(params, X[:10_000], y[:10_000], num_boost_round=2)  # kernels compiled outside the record
    pool = cupy.get_default_memory_pool()
    print(f"input data: {(X.nbytes + y.nbytes) / _MIB:.0f} MiB\n")
    phases = [("matrix build", lambda: dgboost.train(params, X, y, num_boost_round=0)),
              ("training", lambda: dgboost.train(params, X, y, num_boost_round=args.rounds)),
              ("prediction", lambda: booster.predict(X))]
    PeakTracker = _peak_tracker_class()
    booster = None
    for name, phase in phases:
        pool.free_all_blocks()
        held_before = pool.total_bytes()
        with PeakTracker() as tracker:
            result = phase()
            cupy.cuda.Device().synchronize()
        if name == "training":
            booster = result
        del result
        print(f"## {name}: peak live {tracker.peak_bytes / _MIB:.0f} MiB above what was live before; "
              f"pool held {(pool.total_bytes() - held_before) / _MIB:.0f} MiB more at the end")
        for site, size in tracker.at_peak.most_common(args.top):
            print(f"  {size / _MIB:9.1f} MiB  {site}")
        print()
    return 0


def _peak_tracker_class():
    """The hook class, made on first use so that importing this module needs no cupy."""
    import cupy

    class Tracker(cupy.cuda.MemoryHook):
        name = "dgboost_peak_tracker"

        def __init__(self, min_bytes: int = _MIB):
            self.min_bytes = min_bytes
            self.live: dict[int, tuple[int, str]] = {}
            self.live_bytes = 0
            self.peak_bytes = 0
            self.at_peak: collections.Counter = collections.Counter()

        def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
            site = _site() if mem_size >= self.min_bytes else "(allocations under 1 MiB)"
            self.live[mem_ptr] = (mem_size, site)
            self.live_bytes += mem_size
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
                self.at_peak = collections.Counter()
                for block_size, block_site in self.live.values():
                    self.at_peak[block_site] += block_size

        def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
            entry = self.live.pop(mem_ptr, None)
            if entry is not None:
                self.live_bytes -= entry[0]

    return Tracker


def _site() -> str:
    """The two innermost dgboost frames of the current stack, as file:line function."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < 2:
        if frame.f_code.co_filename.startswith(_PACKAGE):
            path = pathlib.Path(frame.f_code.co_filename).name
            frames.append(f"{path}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(frames) or "(outside dgboost)"


if __name__ == "__main__":
    sys.exit(main())
