"""The README stays a newcomer's page and stays true: it fits in about
10 KB, every `make X` it names is a target of the Makefile, and every
mbfs or mbexec option it shows is one the binary's --help lists."""
import os
import re
import subprocess

import pytest

import mbtest

README = os.path.join(mbtest.ROOT, "README.md")
MAKEFILE = os.path.join(mbtest.ROOT, "Makefile")
MAX_BYTES = 10240




def readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def code_bits(text):
    """The README's code: each line of its fenced blocks, and each inline
    code span (whitespace inside a span folded to one space)."""
    bits = []
    rest = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            bits.append(line)
        else:
            rest.append(line)
    for span in re.findall(r"`([^`]+)`", "\n".join(rest)):
        bits.append(" ".join(span.split()))
    return bits


def help_text(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def listed(option, help_out):
    if option.startswith("-o "):
        return re.search(r"-o [^\s]*\b%s\b" % re.escape(option[3:]), help_out) is not None
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(option), help_out) is not None


def options_of(command):
    """The options in one command line, after the program's name: -o's
    names one by one, long options, and short ones standing alone."""
    found = []
    for m in re.finditer(r"(?:^|\s)(-o\s+(\S+)|--[a-z][a-z-]*|-[A-Za-z])(?=[\s=,)]|$)", command):
        if m.group(2):
            for opt in m.group(2).split(","):
                found.append("-o " + opt.split("=")[0])
        else:
            found.append(m.group(1))
    return found


def test_readme_is_short():
    size = os.path.getsize(README)
    assert size <= MAX_BYTES, (
        "README.md is %d bytes, over %d: behaviour belongs in man/mbfs.1 and "
        "man/mbexec.1, benchmark figures in tests/bench/README.md" % (size, MAX_BYTES))


def test_make_targets_exist():
    with open(MAKEFILE, encoding="utf-8") as f:
        targets = set()
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
            if m:
                targets.update(m.group(1).split())
    named = set()
    for bit in code_bits(readme()):
        for m in re.finditer(r"(?:^|[\s;&|(])make((?:\s+[A-Z_]+=\S+)*)\s+([a-z][a-z0-9-]*)", bit):
            named.add(m.group(2))
    assert named, "found no make target in the README"
    missing = sorted(named - targets)
    assert not missing, "the README names make targets the Makefile lacks: %s" % missing


def test_build_steps_are_one_line_each_and_none_in_demo(tmp_path):
    """`make` says one short line per step; `make demo` and `make check`
    build through the quiet sub-make, which says none (issue 20: the demo
    showed 81 compiler lines before its first step)."""
    def make(*args):
        r = subprocess.run(["make", "--no-print-directory", "-C", mbtest.ROOT] + list(args),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r
        return r
    out = str(tmp_path / "o")
    obj = out + "/obj/common/util.o"
    r = make("O=" + out, obj)
    assert r.stdout.splitlines() == ["  CC      " + obj] and r.stderr == "", r
    os.remove(obj)
    r = make("-s", "BUILD_QUIET=1", "O=" + out, obj)
    assert (r.stdout, r.stderr) == ("", ""), r
    assert os.path.exists(obj)
    # the demo and check build with exactly that sub-make
    for target in ("demo", "check"):
        recipe = make("-n", target).stdout.splitlines()
        assert "make --no-print-directory -s BUILD_QUIET=1 all" in recipe, recipe


@pytest.mark.parametrize("program", ["mbfs", "mbexec"])
def test_options_are_in_help(program):
    binary = {"mbfs": mbtest.MBFS, "mbexec": mbtest.MBEXEC}[program]
    if not os.access(binary, os.X_OK):
        pytest.skip("%s is not built" % binary)
    help_out = help_text(binary)
    assert "usage" in help_out, help_out
    shown = set()
    for bit in code_bits(readme()):
        # each command of a line: `mbfs --status --wait ~/sb && fusermount3 -u ~/sb`
        for command in re.split(r"&&|\|\||[|;]", bit):
            words = command.split()
            if words and words[0] in ("sudo",):
                words = words[1:]
            if words and os.path.basename(words[0]) == program:
                shown.update(options_of(" ".join(words[1:])))
    assert shown, "the README shows no %s option" % program
    missing = sorted(o for o in shown if not listed(o, help_out))
    assert not missing, "the README shows %s options that --help does not list: %s" % (
        program, missing)


def test_lone_options_exist():
    """An option written on its own (`--force`, `-o sync_close`) belongs to
    one of the two programs."""
    helps = ""
    for binary in (mbtest.MBFS, mbtest.MBEXEC):
        if not os.access(binary, os.X_OK):
            pytest.skip("%s is not built" % binary)
        helps += help_text(binary)
    lone = set()
    for bit in code_bits(readme()):
        if re.fullmatch(r"(-o\s+\S+|--?[A-Za-z][a-z-]*)(\s+\S+)?", bit):
            lone.update(options_of(bit))
    missing = sorted(o for o in lone if not listed(o, helps))
    assert not missing, "the README names options neither program lists: %s" % missing
