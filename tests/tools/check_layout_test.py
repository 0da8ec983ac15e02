#!/usr/bin/env python3
"""check_layout.py's release-gate rule (5) refuses what it is for: a published privacy statement written
outside core/release/ (privacy.json, an export's privacy metadata), and lets reads and the gate pass.
usage: check_layout_test.py SOURCE_ROOT"""
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(sys.argv[1]) / "scripts" / "check_layout.py"
CASES = [  # (file, line, violation expected)
    ("core/cli/x.cpp", 'sdk::write_file_atomically(dir / "privacy.json", report.dump());', True),
    ("core/run/x.cpp", 'e.metadata[export_keys::epsilon] = std::to_string(s.epsilon);', True),
    ("core/cli/x.cpp", 'e.metadata = {{export_keys::privacy, privacy.dump()}};', True),
    ("core/cli/x.cpp", 'const auto j = read_json(dir / "privacy.json", true);', False),
    ("core/cli/x.cpp", 'line += m.at(export_keys::epsilon) + ", ";', False),
    ("core/release/x.cpp", 'write_file_atomically(dir / "privacy.json", report.dump());', False),
]

failed = 0
for rel, line, expected in CASES:
    with tempfile.TemporaryDirectory() as root:
        for folder in ("sdk", "plugins"):
            (Path(root) / folder).mkdir()
        path = Path(root) / rel
        path.parent.mkdir(parents=True)
        path.write_text("void f() {\n  " + line + "\n}\n")
        result = subprocess.run([sys.executable, str(CHECK), root], capture_output=True, text=True)
        found = "outside core/release/" in result.stdout
        if found != expected or (result.returncode != 0) != expected:
            failed += 1
            print(f"FAIL {rel}: {line!r}: expected {'a' if expected else 'no'} violation, got rc {result.returncode}:\n"
                  f"{result.stdout}")
print(f"{len(CASES) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
