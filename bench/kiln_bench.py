"""What the kiln-vs-peer benchmarks share: the ctypes bridge's artifact metadata and bench cases,
nvidia-smi clocks and driver, CUDA-event timing (torch.cuda._sleep ahead of each timed run, median
of the runs), device-to-device copy bandwidth, input-set rotation sizing, the result header, the
table's rule and the JSON file. Imported by kernels/<group>/bench/<group>_vs_torch.py, which puts
this folder on sys.path (run the scripts by their path). torch is imported only where a helper
needs the GPU.
"""
import ctypes
import datetime
import json
import math
import statistics
import subprocess

L2_BYTES = 60 * 1024 * 1024  # H200; only sizes the rotation, read from the device when possible
COPY_GIB = 2.0  # the copy-bandwidth buffer


class Bridge:
    """A ctypes bridge (libkiln_bench_<group>.so): lib, its artifact tag / fingerprint, and a
    message buffer for its errors. A group's class sets its own functions' signatures."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.kiln_bench_artifact_tag.restype = ctypes.c_char_p
        self.lib.kiln_bench_artifact_fingerprint.restype = ctypes.c_char_p
        self.message = ctypes.create_string_buffer(1024)
        self.tag = self.lib.kiln_bench_artifact_tag().decode()
        self.fingerprint = self.lib.kiln_bench_artifact_fingerprint().decode()

    def read_cases(self, group, fields):
        """The group's bench cases: the cases of kernels/<group>/tests/gpu/cases.h marked kBench,
        in its order, as the bridge exports them (kiln_bench_<group>_case_fields, _case_count,
        _case; bench/bridge.h). A list of dicts: "name", and per (key, type) of `fields`, in the
        bridge's field order, the field converted by type (int, float, bool)."""
        try:
            count_fields = getattr(self.lib, f"kiln_bench_{group}_case_fields")
            count_cases = getattr(self.lib, f"kiln_bench_{group}_case_count")
            get = getattr(self.lib, f"kiln_bench_{group}_case")
        except AttributeError as e:
            raise RuntimeError(f"the bridge has no bench cases ({e}): build it from this checkout "
                               "(bench/CMakeLists.txt)") from e
        count_fields.restype = count_cases.restype = ctypes.c_int
        get.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                        ctypes.POINTER(ctypes.c_double), ctypes.c_int]
        get.restype = ctypes.c_int
        n = count_fields()
        if n != len(fields):
            raise RuntimeError(f"kiln_bench_{group}_case has {n} fields, the script expects "
                               f"{len(fields)} ({', '.join(k for k, _ in fields)}): the bridge "
                               "and the script are from different checkouts")
        cases = []
        for i in range(count_cases()):
            name = ctypes.create_string_buffer(128)
            values = (ctypes.c_double * n)()
            if get(i, name, len(name), values, n) != 0:
                raise RuntimeError(f"kiln_bench_{group}_case({i}) failed")
            case = {"name": name.value.decode()}
            for (key, kind), value in zip(fields, values):
                case[key] = kind(value)
            cases.append(case)
        return cases


def clocks():
    """SM and memory clocks from nvidia-smi ("1980 MHz, 3201 MHz"), or why they could not be read."""
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def driver_version():
    return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def timed(fn, sets, runs, warmup, busy_cycles):
    """Median and min device time (ms) of fn(set) over `runs` runs, rotating through `sets`."""
    import torch
    for i in range(warmup):
        fn(sets[i % len(sets)])
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        torch.cuda._sleep(busy_cycles)  # the host enqueues the events and the op meanwhile
        starts[i].record()
        fn(sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def copy_bandwidth(gib=COPY_GIB, runs=20):
    """Device-to-device copy of `gib` GiB: bytes read + written per second (TB/s)."""
    import torch
    n = int(gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    src.fill_(1)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    med, _ = timed(lambda _s: dst.copy_(src), [None], runs, 2, 1000)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / (med * 1e-3) / 1e12


GEMM_N = 8192  # the dense GEMM whose rate is a bench's tensor-core ceiling


def gemm_tflops(dtype, busy_cycles, runs=20):
    """torch.matmul of two GEMM_N x GEMM_N matrices in `dtype`: the dense tensor-core rate."""
    import torch
    a = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=dtype)
    b = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=dtype)
    c = torch.empty(GEMM_N, GEMM_N, device="cuda", dtype=dtype)
    med, _ = timed(lambda _s: torch.matmul(a, b, out=c), [None], runs, 5, busy_cycles)
    return 2 * GEMM_N ** 3 / (med * 1e-3) / 1e12


def error_line(e):
    """An exception as one line for a bench row: its type and its message's first line."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def tbps(nbytes, ms):
    """Bytes moved in `ms` milliseconds, in TB/s."""
    return nbytes / (ms * 1e-3) / 1e12


def rotation_sets(set_bytes, l2_bytes, most):
    """How many input sets of `set_bytes` to rotate through so they exceed 4x the L2: 2 .. most."""
    return max(2, min(most, math.ceil(4 * l2_bytes / set_bytes)))


def l2_bytes_of(props):
    return getattr(props, "L2_cache_size", L2_BYTES) or L2_BYTES


def start_seed(seed):
    """(seed, a CUDA torch.Generator seeded with it); seed None: the current time."""
    import torch
    seed = seed if seed is not None else int(datetime.datetime.now().timestamp())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return seed, gen


def result_header(bench, props, l2_bytes, bridge, seed, versions=None):
    """The result's first fields, in the evidence's order; `versions` (e.g. {"cudnn": ...}) go
    after torch's own versions."""
    import torch
    result = {
        "bench": bench, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "gpu": props.name, "sm": props.major * 10 + props.minor,
        "multiprocessors": props.multi_processor_count, "l2_bytes": l2_bytes,
        "torch": torch.__version__, "cuda": torch.version.cuda,
    }
    result.update(versions or {})
    result.update({
        "driver": driver_version(),
        "artifact_tag": bridge.tag, "artifact_fingerprint": bridge.fingerprint, "seed": seed,
        "clocks_before": clocks(),
    })
    return result


def measure_copy(result):
    """Measures the copy bandwidth into result (copy_tbps, clocks_after_copy); returns it."""
    copy_tbps = copy_bandwidth()
    result["copy_tbps"] = copy_tbps
    result["clocks_after_copy"] = clocks()
    return copy_tbps


def print_copy(result):
    print(f"device-to-device copy: {result['copy_tbps']:.2f} TB/s ({COPY_GIB:g} GiB, read + "
          f"written); clocks (sm, mem): {result['clocks_after_copy']}")


def print_header(header):
    print(header)
    print("-" * len(header))


def write_json(path, result):
    with open(path, "w") as f:
        json.dump(result, f, indent=2)


def finish(path, result, failed):
    """The closing clocks line, failed_checks, the JSON file; returns the exit code."""
    print(f"clocks (sm, mem) after: {result['clocks_after']}")
    result["failed_checks"] = failed
    write_json(path, result)
    print(f"wrote {path}")
    return 1 if failed else 0
