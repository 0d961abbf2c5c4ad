# lit configuration for the moejit CLI tests. Run through CTest (`ctest -R lit`), which passes
# the paths below as --param.
import os

import lit.formats

config.name = "moejit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
# Outputs (%t) go to the build tree when CTest says where it is.
config.test_exec_root = lit_config.params.get("exec_root", os.path.join(config.test_source_root, "Output"))

moejit = lit_config.params.get("moejit")
filecheck = lit_config.params.get("filecheck")
specs = lit_config.params.get("specs")
if not (moejit and filecheck and specs):
    lit_config.fatal("run through ctest, or pass --param moejit=... --param filecheck=... --param specs=...")

config.environment["PATH"] = os.pathsep.join([os.path.dirname(filecheck), config.environment.get("PATH", os.environ.get("PATH", ""))])
# The sanitizers' options reach the CLI under scripts/sanitize.
for var in ("HOME", "CUDA_HOME", "CUDA_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["MOEJIT_JOBS"] = "2"
config.substitutions.append(("%moejit", moejit))
config.substitutions.append(("%specs", specs))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", "python3"))

# Features for the tests that need root: giving a file to another user, mounting a small tmpfs
# (a read-only or full filesystem). Without them those tests report UNSUPPORTED, named.
def _can_mount_tmpfs():
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    import subprocess
    import tempfile

    d = tempfile.mkdtemp()
    try:
        run = lambda *cmd: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        return run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d) and run("umount", d)
    finally:
        os.rmdir(d)


if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")
if _can_mount_tmpfs():
    config.available_features.add("tmpfs")
