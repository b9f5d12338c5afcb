"""nvcc with a cache of object files, for building torch_reduce against several torch releases in a
row (CI builds two; scripts/check_torch.sh one a release).

The CUDA sources include no torch header, so their objects are the same whichever torch the
extension is built against, and the second build need not compile them again (about nine of CI's
minutes on two cores). setup.py puts this in front of nvcc when TREDUCE_NVCC_CACHE names a folder,
and tests/test_cpp.py in front of CMake's (CMAKE_CUDA_COMPILER_LAUNCHER):

    python nvcc_cache.py NVCC ARGS...   (what torch's builder runs as $nvcc: PYTORCH_NVCC)

An object is reused only when everything that decides it is the same: nvcc's version, the
arguments less the paths of the output, its dependency file and rule target and the include
folders (-I, -isystem), and the path and contents of every file the source includes (nvcc -M
lists them; a torch header would be listed under each release's own path, so a source that
included one would never be reused across releases). Anything else runs nvcc as given.

The arguments are compared as the object sees them (normalized), so that the CMake build of
tests/test_cpp.py reuses the Python build's objects (CMakeLists.txt compiles the CUDA sources
with the Python build's flags): a macro defined with -D that none of those files names cannot
change the object (torch's extension builder defines TORCH_EXTENSION_NAME, CMake its targets'
USE_DISTRIBUTED and treduce_EXPORTS), and the defines that remain are compared as a set; a few
spellings of the same flag are one (-gencode X and -gencode=X, -Xcompiler=-fPIC and
--compiler-options '-fPIC'), as are their orders and repeats; -forward-unknown-to-host-compiler,
-x cu on a .cu source and -Xcudafe --diag_suppress=... (which warnings are shown) decide nothing.

TREDUCE_CUDA_CHECK_ONLY=1 makes every compilation a compile check, for CI's machines, which have
no GPU: each -gencode's code becomes the PTX of its architecture (no ptxas, no SASS) and the
device code is not optimized (-Xcicc -O0), so the kernels are parsed, instantiated and lowered to
PTX, and a source that does not compile fails, at about a quarter of the time (reduce_prod.cu:
215 s, of which cicc 102 and ptxas 76, against 59 s). What it misses is what only ptxas or a GPU
finds (resources, the SASS); GPU builds compile without it. The library it gives is for tests
that run no kernel: torch_reduce warns when one is imported with a GPU present.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile


def split_command(args):
    """(arguments that decide the object, the output, the dependency file, arguments for nvcc -M)."""
    key, deps, output, depfile = [], [], None, None
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if arg in ("-o", "-MF", "-MT"):  # -MT: the dependency rule's target (CMake passes the output)
            if arg == "-o":
                output = value
            elif arg == "-MF":
                depfile = value
            i += 2
            continue
        if arg in ("-I", "-isystem"):
            deps += [arg, value]
            i += 2
            continue
        i += 1
        if arg.startswith("-I"):
            deps.append(arg)
        elif arg == "-MD":
            pass
        else:
            key.append(arg)
            if arg != "-c":
                deps.append(arg)
    return key, output, depfile, deps


# Flags that take their value as the next argument (split_command takes out -o, -MF, -MT, -I and
# -isystem first).
TWO_TOKEN_FLAGS = ("-gencode", "--generate-code", "-Xcompiler", "--compiler-options", "-Xptxas", "-Xcicc", "-Xfatbin",
                   "-Xcudafe", "-ccbin", "--compiler-bindir", "-arch", "-code", "-x", "-std", "-t", "--threads",
                   "-include", "-maxrregcount", "-rdc")


def normalized(key, texts):
    """`key` (split_command's) as the object sees it, `texts` the contents of the files the
    source includes and itself (see the top)."""
    out, defines, undefined = [], {}, False
    cuda_source = any(a.endswith(".cu") and not a.startswith("-") for a in key)
    i = 0
    while i < len(key):
        arg = key[i]
        value = key[i + 1] if i + 1 < len(key) else None
        i += 1
        if arg == "-forward-unknown-to-host-compiler":
            continue
        if arg == "-x" and value == "cu" and cuda_source:
            i += 1
            continue
        if arg == "-Xcudafe" and value is not None and all(v.startswith("--diag_suppress=") for v in value.split(",")):
            i += 1
            continue
        if arg in TWO_TOKEN_FLAGS and value is not None:
            arg, i = f"{arg}={value}", i + 1
        if arg.startswith(("-Xcompiler=", "--compiler-options=")):
            arg = "-Xcompiler=" + arg.split("=", 1)[1].strip("'\"")
        if arg.startswith("-U"):
            undefined = True
        if arg.startswith("-D") and len(arg) > 2:
            defines[arg[2:].partition("=")[0]] = arg  # the last definition of a name wins, as in nvcc
            continue
        out.append(arg)
    for name, arg in defines.items():
        if undefined or any(re.search(rb"\b" + re.escape(name.encode()) + rb"\b", t) for t in texts):
            out.append(arg)
    # Each flag with its value is one argument now; none depends on another's place, and one given
    # twice is given (the Python build passes -c twice).
    return sorted(set(out))


def parse_make_rule(text):
    """The prerequisites of a make rule written by nvcc -M (paths with spaces are not supported)."""
    body = text.replace("\\\n", " ").split(":", 1)[1]
    return body.split()


def object_key(version, key_args, paths):
    """The cache's name for the object of a command: nvcc's version, its normalized arguments,
    and the path and contents of each file it reads."""
    texts = {}
    for path in paths:
        with open(path, "rb") as f:
            texts[path] = f.read()
    digest = hashlib.sha256()
    for part in [version, *normalized(key_args, texts.values())]:
        digest.update(part.encode() + b"\0")
    for path, text in texts.items():
        digest.update(os.path.abspath(path).encode() + b"\0" + hashlib.sha256(text).hexdigest().encode() + b"\0")
    return digest.hexdigest()


def check_only(args):
    """The arguments of TREDUCE_CUDA_CHECK_ONLY's compile check (see the top): each -gencode
    (either spelling, one or two tokens) builds its architecture's PTX only, and cicc does not
    optimize."""
    out = []
    for arg in args:
        match = re.search(r"arch=(compute_\w+),code=", arg)
        if match and arg.startswith(("-gencode=", "--generate-code=", "arch=")):
            arg = arg[:match.end()] + match.group(1)
        out.append(arg)
    return out + ["-Xcicc", "-O0"] if "-c" in args else out


def main(argv):
    nvcc, args = argv[0], argv[1:]
    if os.environ.get("TREDUCE_CUDA_CHECK_ONLY") == "1":
        args = check_only(args)
    cache = os.environ.get("TREDUCE_NVCC_CACHE")
    key_args, output, depfile, dep_args = split_command(args)
    if not cache or output is None or "-c" not in args:
        return subprocess.call([nvcc, *args])

    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    rule = subprocess.run([nvcc, "-M", "-MT", output, *dep_args], capture_output=True, text=True)
    if rule.returncode != 0:
        return subprocess.call([nvcc, *args])  # nvcc's own error message
    cached = os.path.join(cache, object_key(version, key_args, parse_make_rule(rule.stdout)) + ".o")

    if os.path.exists(cached):
        copy_atomically(cached, output)
        if depfile:
            with open(depfile, "w") as f:
                f.write(rule.stdout)
        print(f"nvcc_cache: reused {os.path.basename(output)}", flush=True)
        return 0
    rc = subprocess.call([nvcc, *args])
    if rc == 0:
        os.makedirs(cache, exist_ok=True)
        copy_atomically(output, cached)
    return rc


def copy_atomically(source, target):
    """A copy that appears whole or not at all (two builds may share the cache)."""
    folder = os.path.dirname(os.path.abspath(target))
    fd, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
    os.close(fd)
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
