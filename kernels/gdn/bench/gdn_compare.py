#!/usr/bin/env python3
"""Side by side: two runs of gdn_vs_torch.py (JSON), e.g. the current kernel (A) and a candidate (B)
built into separate artifacts and benched one after the other in one GPU session.

    python3 kernels/gdn/bench/gdn_compare.py A.json B.json [--names A,B]

Per row (op, batch, tokens) of both runs: the floor, kiln's median us in each run, A / B (> 1: B is
faster), % of the copy bandwidth each run measured, and flash-linear-attention's median from each
run with fla / kiln of each (> 1: kiln is faster), so that run-to-run drift shows in the peer's
column. Only the standard library: it runs anywhere.
"""
import argparse
import json
import sys


def rows_of(path):
    """(the run's header, its rows by (op, batch, tokens)); a missing or unreadable file (a run that
    crashed or timed out) gives no rows, so the other run still prints."""
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: {type(e).__name__}: {e}")
        return {}, {}
    return result, {(r["op"], r["batch"], r["tokens"]): r for r in result.get("rows", [])}


def fmt(value, spec, width):
    return format(value, spec).rjust(width) if value is not None else "-".rjust(width)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", default="A,B", help="labels of the two runs (default A,B)")
    args = ap.parse_args()
    na, nb = (args.names.split(",") + ["A", "B"])[:2]
    ra, a = rows_of(args.a)
    rb, b = rows_of(args.b)
    print(f"{na}: {args.a} (artifact {ra.get('artifact_fingerprint', '?')[:16]}, copy "
          f"{ra.get('copy_tbps', 0):.2f} TB/s, clocks {ra.get('clocks_after_copy', '?')})")
    print(f"{nb}: {args.b} (artifact {rb.get('artifact_fingerprint', '?')[:16]}, copy "
          f"{rb.get('copy_tbps', 0):.2f} TB/s, clocks {rb.get('clocks_after_copy', '?')})")
    header = (f"{'op':>6} {'B':>4} {'T':>2} {'floor':>7} {na + ' us':>9} {nb + ' us':>9} "
              f"{na + '/' + nb:>7} {na + ' %cp':>7} {nb + ' %cp':>7} {'fla(' + na + ')':>9} "
              f"{'fla(' + nb + ')':>9} {'fla/' + na:>8} {'fla/' + nb:>8}  ok")
    print(header)
    print("-" * len(header))
    bad = 0
    for key in sorted(set(a) | set(b), key=lambda k: (k[0] != "decode", k[0], k[1], k[2])):
        x, y = a.get(key, {}), b.get(key, {})
        ka, kb = x.get("kiln_us"), y.get("kiln_us")
        fa, fb = x.get("fla_us"), y.get("fla_us")
        ok = x.get("correct", False) and y.get("correct", False)
        bad += not ok
        print(f"{key[0]:>6} {key[1]:>4} {key[2]:>2} {fmt((x or y).get('floor_us'), '.1f', 7)} "
              f"{fmt(ka, '.1f', 9)} {fmt(kb, '.1f', 9)} "
              f"{fmt(ka / kb if ka and kb else None, '.2f', 6)}x "
              f"{fmt(x.get('kiln_pct_of_copy'), '.1f', 6)}% {fmt(y.get('kiln_pct_of_copy'), '.1f', 6)}% "
              f"{fmt(fa, '.1f', 9)} {fmt(fb, '.1f', 9)} "
              f"{fmt(fa / ka if fa and ka else None, '.2f', 7)}x "
              f"{fmt(fb / kb if fb and kb else None, '.2f', 7)}x  "
              f"{'yes' if ok else 'NO: ' + (x.get('why') or y.get('why') or 'missing')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
