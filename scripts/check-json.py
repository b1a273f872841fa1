#!/usr/bin/python3
"""Validate costlab/1 documents against the schema in docs/src/costlab-1.schema.json.

    scripts/check-json.py results.json [more.json ...]    # a file, or - for stdin

Exit 0 when every document is valid, 1 when one is not (each error on a line: the file, the
path to the key, what is wrong), 2 for bad input (a file that cannot be read or is not JSON,
or no jsonschema module: apt-get install python3-jsonschema). Uses Debian's python3-jsonschema.
"""
import json
import os
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "src",
                      "costlab-1.schema.json")


def main(argv):
    try:
        import jsonschema
    except ImportError:
        print("check-json: no Python jsonschema module; install it with "
              "`apt-get install python3-jsonschema` (or scripts/install-deps.sh)", file=sys.stderr)
        return 2
    if not argv:
        print("check-json: name the documents to check (a file, or - for stdin)", file=sys.stderr)
        return 2
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    bad = 0
    for name in argv:
        try:
            if name == "-":
                doc = json.load(sys.stdin)
            else:
                with open(name, encoding="utf-8") as f:
                    doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"check-json: {name}: {e}; give a costlab/1 JSON document", file=sys.stderr)
            return 2
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(p) for p in err.absolute_path) or "(the document)"
            print(f"{name}: {path}: {err.message}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
