#!/usr/bin/env python3
"""Compile a CUDA C++ file to a cubin with NVRTC and disassemble it to SASS with nvdisasm.

Needs no CUDA toolkit and no GPU: only the PyPI wheels `nvidia-cuda-nvrtc` and
`nvidia-cuda-nvdisasm`, installed into a cache folder (this script installs nothing):

    python3 -m pip install --target "$DIR/nvrtc"    nvidia-cuda-nvrtc==13.5.37
    python3 -m pip install --target "$DIR/nvdisasm" nvidia-cuda-nvdisasm==13.5.37
    python3 scripts/sass.py --cache "$DIR" --arch sm_90a workloads/cuda/gemm_wgmma_sm90a.cu -o out.sass

(scripts/test.sh does exactly that, with DIR=${GPUSIM_WHEEL_CACHE:-$HOME/.cache/gpusim-wheels}.)
`--cache` defaults to $GPUSIM_WHEEL_CACHE. The wheels are searched anywhere under the cache
folder, so one `--target` folder for both, or one per package, both work.

Exit codes: 0 success; 1 compilation or disassembly failed (the NVRTC log or nvdisasm's
message is printed on stderr); 2 usage error or the wheels are missing.
"""

import argparse
import ctypes
import os
import stat
import subprocess
import sys
import tempfile

NVRTC_SUCCESS = 0


def die(code, msg):
    print(f"sass.py: {msg}", file=sys.stderr)
    sys.exit(code)


def find_file(root, predicate):
    """First file under `root` (sorted walk, so deterministic) whose name satisfies `predicate`."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if predicate(f):
                return os.path.join(dirpath, f)
    return None


def is_libnvrtc(name):
    # libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12 ...; not libnvrtc-builtins.so.*
    return name == "libnvrtc.so" or name.startswith("libnvrtc.so.")


def find_tools(cache):
    missing = []
    lib = find_file(cache, is_libnvrtc) if os.path.isdir(cache) else None
    if lib is None:
        missing.append("nvidia-cuda-nvrtc (libnvrtc.so.*)")
    disasm = find_file(cache, lambda n: n == "nvdisasm") if os.path.isdir(cache) else None
    if disasm is None:
        missing.append("nvidia-cuda-nvdisasm (bin/nvdisasm)")
    if missing:
        die(
            2,
            f"the CUDA wheels are missing from {cache!r}: {', '.join(missing)}.\n"
            f"Install them with:\n"
            f"  python3 -m pip install --target {cache}/nvrtc nvidia-cuda-nvrtc==13.5.37\n"
            f"  python3 -m pip install --target {cache}/nvdisasm nvidia-cuda-nvdisasm==13.5.37\n"
            f"(scripts/test.sh does this into ${{GPUSIM_WHEEL_CACHE:-$HOME/.cache/gpusim-wheels}}).",
        )
    # pip --target does not always keep the executable bit.
    mode = os.stat(disasm).st_mode
    if not mode & stat.S_IXUSR:
        try:
            os.chmod(disasm, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as e:
            die(2, f"{disasm} is not executable and cannot be made so: {e}")
    return lib, disasm


def load_nvrtc(lib_path):
    # libnvrtc loads libnvrtc-builtins.so.* from its own folder through the loader's search
    # path, which does not include that folder: load the builtins first by full path.
    libdir = os.path.dirname(lib_path)
    for f in sorted(os.listdir(libdir)):
        if f.startswith("libnvrtc-builtins.so"):
            ctypes.CDLL(os.path.join(libdir, f), mode=ctypes.RTLD_GLOBAL)
            break
    nvrtc = ctypes.CDLL(lib_path)
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    nvrtc.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    nvrtc.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    nvrtc.nvrtcCreateProgram.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
    ]
    nvrtc.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    nvrtc.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    nvrtc.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    nvrtc.nvrtcGetCUBINSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    nvrtc.nvrtcGetCUBIN.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    nvrtc.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    return nvrtc


def compile_cubin(nvrtc, src_path, arch, defines, extra_opts, verbose):
    with open(src_path, "rb") as f:
        src = f.read()

    def check(res, what):
        if res != NVRTC_SUCCESS:
            die(1, f"{what} failed: {nvrtc.nvrtcGetErrorString(res).decode()}")

    prog = ctypes.c_void_p()
    name = os.path.basename(src_path).encode()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={arch}", "-std=c++17"]
    opts += [f"-D{d}" for d in defines]
    opts += extra_opts
    if verbose:
        opts.append("--ptxas-options=-v")
    c_opts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    res = nvrtc.nvrtcCompileProgram(prog, len(opts), c_opts)

    log_size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size))
    log = ""
    if log_size.value > 1:
        buf = ctypes.create_string_buffer(log_size.value)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
    if res != NVRTC_SUCCESS:
        print(log, file=sys.stderr)
        die(1, f"NVRTC could not compile {src_path} for {arch} ({' '.join(opts)}): "
               f"{nvrtc.nvrtcGetErrorString(res).decode()}")
    if log:
        # Warnings (and with --verbose, ptxas' register/shared-memory usage).
        print(log, file=sys.stderr)

    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
    if size.value == 0:
        die(1, f"NVRTC produced no cubin for {arch}: use an sm_XX (not compute_XX) architecture")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw[: size.value]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="CUDA C++ file")
    ap.add_argument("--arch", default="sm_80", help="sm_80, sm_90a, ... (default sm_80)")
    ap.add_argument("--cache", default=os.environ.get("GPUSIM_WHEEL_CACHE"),
                    help="folder where the wheels are installed (default $GPUSIM_WHEEL_CACHE)")
    ap.add_argument("-o", "--output", help="write the SASS here (default stdout)")
    ap.add_argument("--cubin", help="also keep the cubin here")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="preprocessor definition passed to NVRTC (repeatable)")
    ap.add_argument("--nvrtc-opt", dest="nvrtc_opts", action="append", default=[],
                    help="extra NVRTC option (repeatable)")
    ap.add_argument("--cfg", action="store_true", help="nvdisasm -cfg: a DOT control-flow graph")
    ap.add_argument("-v", "--verbose", action="store_true", help="print ptxas resource usage on stderr")
    args = ap.parse_args()

    if not args.cache:
        die(2, "no wheel cache: pass --cache DIR or set GPUSIM_WHEEL_CACHE "
               "(scripts/test.sh installs the wheels into ${GPUSIM_WHEEL_CACHE:-$HOME/.cache/gpusim-wheels})")
    if not args.arch.startswith("sm_"):
        die(2, f"--arch {args.arch}: a cubin needs a real architecture such as sm_80 or sm_90a")
    if not os.path.isfile(args.source):
        die(2, f"{args.source}: no such file")

    lib, disasm = find_tools(args.cache)
    try:
        nvrtc = load_nvrtc(lib)
    except OSError as e:
        die(2, f"cannot load {lib}: {e}")
    cubin = compile_cubin(nvrtc, args.source, args.arch, args.defines, args.nvrtc_opts, args.verbose)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        if args.cubin:
            with open(args.cubin, "wb") as f:
                f.write(cubin)
        cmd = [disasm, "-cfg" if args.cfg else "-c", path]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            die(1, f"{' '.join(cmd)} exited with {p.returncode}")
        sass = p.stdout

    if args.output:
        with open(args.output, "w") as f:
            f.write(sass)
    else:
        sys.stdout.write(sass)


if __name__ == "__main__":
    main()
