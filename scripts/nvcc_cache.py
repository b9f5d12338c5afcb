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
"""

import hashlib
import os
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


def parse_make_rule(text):
    """The prerequisites of a make rule written by nvcc -M (paths with spaces are not supported)."""
    body = text.replace("\\\n", " ").split(":", 1)[1]
    return body.split()


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv):
    nvcc, args = argv[0], argv[1:]
    cache = os.environ.get("TREDUCE_NVCC_CACHE")
    key_args, output, depfile, dep_args = split_command(args)
    if not cache or output is None or "-c" not in args:
        return subprocess.call([nvcc, *args])

    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    rule = subprocess.run([nvcc, "-M", "-MT", output, *dep_args], capture_output=True, text=True)
    if rule.returncode != 0:
        return subprocess.call([nvcc, *args])  # nvcc's own error message
    digest = hashlib.sha256()
    for part in [version, *key_args]:
        digest.update(part.encode() + b"\0")
    for path in parse_make_rule(rule.stdout):
        digest.update(os.path.abspath(path).encode() + b"\0" + file_digest(path).encode() + b"\0")
    cached = os.path.join(cache, digest.hexdigest() + ".o")

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
