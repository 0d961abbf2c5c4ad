#!/usr/bin/env python3
"""Compiles the README's C++ snippets (every ```cpp block, in order) as one function against the
public headers, so that the embedding example cannot drift from the API.
Usage: compile_readme.py README PRELUDE CXX [compiler flags...]"""
import pathlib
import re
import subprocess
import sys
import tempfile


def main() -> int:
    readme, prelude, cxx, *flags = sys.argv[1:]
    blocks = re.findall(r"^```cpp\n(.*?)^```", pathlib.Path(readme).read_text(), re.S | re.M)
    if not blocks:
        print(f"{readme}: no ```cpp blocks")
        return 1
    includes, body = [], []
    for block in blocks:
        for line in block.splitlines():
            (includes if line.startswith("#include") else body).append(line)
    source = "\n".join(includes + [f'#include "{pathlib.Path(prelude).resolve()}"', "", "void readme_examples() {"]
                       + ["  " + line for line in body] + ["}", ""])
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "readme_examples.cpp"
        path.write_text(source)
        result = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", *flags, str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"The README's C++ snippets ({len(blocks)} blocks) do not compile. The function compiled:\n{source}")
        print(result.stderr)
        return 1
    print(f"ok: {len(blocks)} C++ blocks of {readme} compile ({len(body)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
