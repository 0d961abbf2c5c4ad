#!/usr/bin/env python3
"""Checks every shipped spec against specs/schema.json, and that every spec in the bad-spec
directory is rejected by it. Usage: check_specs.py SCHEMA SPEC_DIR BAD_DIR"""
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    sys.exit("check_specs.py: the jsonschema module is missing (Debian: apt-get install python3-jsonschema)")


def main() -> int:
    schema_path, spec_dir, bad_dir = (pathlib.Path(a) for a in sys.argv[1:4])
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = 0
    shipped = sorted(p for p in spec_dir.glob("*.json") if p.name != "schema.json")
    for path in shipped:
        errors = sorted(validator.iter_errors(json.loads(path.read_text())), key=lambda e: list(e.path))
        if errors:
            failures += 1
            print(f"FAIL {path}: {errors[0].message} at /{'/'.join(map(str, errors[0].path))}")
        else:
            print(f"ok   {path}")
    for path in sorted(bad_dir.glob("*.json")):
        if validator.is_valid(json.loads(path.read_text())):
            failures += 1
            print(f"FAIL {path}: the schema accepts a spec moejit rejects")
        else:
            print(f"ok   {path} (rejected)")
    print(f"{len(shipped)} shipped specs, {failures} failures")
    return 1 if failures or not shipped else 0


if __name__ == "__main__":
    sys.exit(main())
