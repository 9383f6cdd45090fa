"""scripts/charts.py: docs/performance.md and its charts are what the committed evidence gives.

Runs `charts.py --check` on the tree (fails when evidence, a README's citation or the script
changed and docs/performance* was not regenerated), then checks that --check notices a changed
page, a changed chart, a missing chart and a chart no group makes, on a regenerated copy in a
temporary folder.

Run by ctest (label unit, registered only when the project's .venv has matplotlib):
    .venv/bin/python -B tests/unit/charts_test.py
"""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "charts.py"


def charts(*args):
    return subprocess.run([sys.executable, "-B", str(SCRIPT), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


class ChartsTest(unittest.TestCase):
    def test_committed_charts_match_the_evidence(self):
        r = charts("--check")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_check_names_what_is_stale(self):
        with tempfile.TemporaryDirectory(prefix="kiln-charts-test-") as tmp:
            out = pathlib.Path(tmp)
            r = charts("--out", str(out))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            pngs = sorted((out / "performance").glob("*.png"))
            # One chart per kernel group (issue 30): every folder of kernels/ with a kiln.toml.
            groups = sorted(d.name for d in (ROOT / "kernels").iterdir()
                            if (d / "kiln.toml").is_file())
            self.assertEqual([p.stem for p in pngs], groups)
            for p in pngs:
                self.assertLess(p.stat().st_size, 150 * 1024, p.name)
                self.assertNotIn(b"tEXt", p.read_bytes(), p.name)  # no software / time stamp
            md = (out / "performance.md").read_text()
            for group in groups:
                self.assertIn(f"## {group}", md)
                self.assertIn(f"(performance/{group}.png)", md)
            for fp in ("7146c533", "621e7dfa", "d9997d1e", "bb421535", "3369dd59", "ba4b68da",
                       "14d791c0", "a406cb2a", "41f63d7f", "fd283156"):
                self.assertIn(fp, md)
            self.assertEqual(charts("--check", "--out", str(out)).returncode, 0)

            (out / "performance.md").write_text(md.replace("1.44x", "1.45x", 1))
            r = charts("--check", "--out", str(out))
            self.assertEqual(r.returncode, 1)
            self.assertIn("performance.md: differs", r.stderr)
            (out / "performance.md").write_text(md)

            from PIL import Image  # a matplotlib dependency
            w4 = out / "performance" / "w4a16.png"
            good = w4.read_bytes()
            with Image.open(w4) as img:
                img = img.copy()
            img.putpixel((5, 5), (img.getpixel((5, 5)) + 1) % 256)
            img.save(w4)
            r = charts("--check", "--out", str(out))
            self.assertEqual(r.returncode, 1)
            self.assertIn("w4a16.png: differs", r.stderr)

            # The same pixels compressed otherwise are the same chart.
            with Image.open(out / "performance" / "fmha.png") as img:
                img.save(out / "performance" / "fmha.png", compress_level=1)
            w4.write_bytes(good)
            r = charts("--check", "--out", str(out))
            self.assertEqual(r.returncode, 0, r.stderr)

            (out / "performance" / "gdn.png").unlink()
            (out / "performance" / "old.png").write_bytes(good)
            r = charts("--check", "--out", str(out))
            self.assertEqual(r.returncode, 1)
            self.assertIn("gdn.png: missing", r.stderr)
            self.assertIn("old.png: not made by scripts/charts.py", r.stderr)


if __name__ == "__main__":
    unittest.main()
