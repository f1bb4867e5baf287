#!/usr/bin/env python3
"""check_test_names.py's own test: a synthetic mini-project passes clean, and each planted fault
fails it with its own line.

Usage: test_check_test_names.py [CMAKE [CTEST]]

The mini-project (a temporary folder, LANGUAGES NONE: nothing is compiled) has tests/unit and
tests/e2e/cli, names built in a loop and a function defined in tests/CMakeLists.txt that
registers a test for its caller. Each plant is configured in a fresh copy: a name without its
tier, a name with another tier's prefix, a loop-built name without it, a test registered in
tests/CMakeLists.txt itself and one registered in a product folder (shim/)."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_test_names.py")
CMAKE = sys.argv[1] if len(sys.argv) > 1 else "cmake"
CTEST = sys.argv[2] if len(sys.argv) > 2 else "ctest"

CLEAN = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(mini LANGUAGES NONE)\n"
                      "enable_testing()\nadd_subdirectory(shim)\nadd_subdirectory(tests)\n",
    "shim/CMakeLists.txt": "# no tests here\n",
    "tests/CMakeLists.txt": "function(mini_test name)\n  add_test(NAME ${name} COMMAND true)\n"
                            "endfunction()\nadd_subdirectory(unit)\nadd_subdirectory(e2e)\n",
    "tests/unit/CMakeLists.txt": "add_test(NAME unit_ring COMMAND true)\n"
                                 "foreach(t a b)\n  add_test(NAME unit_${t} COMMAND true)\n"
                                 "endforeach()\n",
    "tests/e2e/CMakeLists.txt": "add_test(NAME e2e_minillm COMMAND true)\nadd_subdirectory(cli)\n",
    "tests/e2e/cli/CMakeLists.txt": "foreach(t usage torn)\n  add_test(NAME e2e_cli_${t} COMMAND true)\n"
                                    "endforeach()\nmini_test(e2e_cli_helper)\n",
}

# name: (file, text appended to it, line the checker must print)
PLANTS = {
    "no_tier": ("tests/e2e/cli/CMakeLists.txt", "add_test(NAME cli_golden COMMAND true)\n",
                "cli_golden: registered in tests/e2e/cli/CMakeLists.txt, so its name must start with e2e_"),
    "other_tier": ("tests/unit/CMakeLists.txt", "add_test(NAME e2e_decoder_classes COMMAND true)\n",
                   "e2e_decoder_classes: registered in tests/unit/CMakeLists.txt, so its name must start with unit_"),
    "loop": ("tests/e2e/cli/CMakeLists.txt",
             "foreach(c x y)\n  add_test(NAME shim_robust_${c} COMMAND true)\nendforeach()\n",
             "shim_robust_y: registered in tests/e2e/cli/CMakeLists.txt, so its name must start with e2e_"),
    "by_function": ("tests/unit/CMakeLists.txt", "mini_test(decoder_hash)\n",
                    "decoder_hash: registered in tests/unit/CMakeLists.txt, so its name must start with unit_"),
    "tests_root": ("tests/CMakeLists.txt", "add_test(NAME unit_stray COMMAND true)\n",
                   "unit_stray: registered in tests/CMakeLists.txt, outside a tier folder tests/<tier>/"),
    "product_folder": ("shim/CMakeLists.txt", "add_test(NAME unit_in_shim COMMAND true)\n",
                       "unit_in_shim: registered in shim/CMakeLists.txt, outside a tier folder tests/<tier>/"),
}


def run(tmp, name, plant):
    src = os.path.join(tmp, name, "src")
    build = os.path.join(tmp, name, "build")
    for rel, text in CLEAN.items():
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "w") as f:
            f.write(text)
    if plant:
        with open(os.path.join(src, plant[0]), "a") as f:
            f.write(plant[1])
    subprocess.run([CMAKE, "-S", src, "-B", build], check=True, capture_output=True)
    return subprocess.run([sys.executable, CHECKER, "--ctest", CTEST, "--build", build, "--src", src],
                          capture_output=True, text=True)


def main():
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        r = run(tmp, "clean", None)
        if r.returncode != 0:
            print(f"FAIL clean: exit {r.returncode}\n{r.stdout}{r.stderr}")
            bad += 1
        else:
            print(f"ok clean: {r.stdout.strip()}")
        for name, plant in PLANTS.items():
            r = run(tmp, name, plant)
            if r.returncode == 1 and plant[2] in r.stdout.splitlines():
                print(f"ok {name}: {plant[2]}")
            else:
                print(f"FAIL {name}: exit {r.returncode}, wanted the line {plant[2]!r}\n{r.stdout}{r.stderr}")
                bad += 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
