"""Shell completion (common/completion/): the bash script sourced in a
plain `bash` and asked, as bash asks it, for options, values and profile
names; the zsh scripts loaded by compinit in an interactive zsh on a
terminal and asked with Tab; and every long option of each binary's
--help is in both the bash and the zsh scripts."""
import os
import pty
import re
import select
import shutil
import subprocess
import time

import pytest

import mbtest

COMPL = os.path.join(mbtest.ROOT, "common", "completion")
BASH = os.path.join(COMPL, "mainbrella.bash")
ZSH = {"mbfs": os.path.join(COMPL, "_mbfs"), "mbexec": os.path.join(COMPL, "_mbexec")}

# COMP_WORDS as bash splits the line (COMP_WORDBREAKS: blanks, '=', ':'...)
DRIVER = r'''
source "$1"
line=$2
COMP_LINE=$line
COMP_POINT=${#line}
COMP_WORDS=()
rest=$line
while [[ -n $rest ]]; do
    rest=${rest#"${rest%%[! ]*}"}
    [[ -z $rest ]] && break
    if [[ $rest == [=:]* ]]; then w=${rest:0:1}; else w=${rest%%[ =:]*}; fi
    COMP_WORDS+=("$w")
    rest=${rest:${#w}}
done
[[ $line == *[\ =:] ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
"$3"
printf '%s\n' "${COMPREPLY[@]}"
'''


def complete(line, func, env=None):
    e = dict(os.environ)
    e["PATH"] = os.path.dirname(mbtest.MBFS) + ":" + os.path.dirname(mbtest.MBEXEC) + ":" + e["PATH"]
    e.update(env or {})
    r = subprocess.run(["bash", "-c", DRIVER, "drv", BASH, line, func], capture_output=True,
                       timeout=30, env=e)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return [w for w in r.stdout.decode().splitlines() if w]


def test_bash_script_is_valid():
    r = subprocess.run(["bash", "-n", BASH], capture_output=True)
    assert r.returncode == 0, r.stderr


def test_options():
    assert complete("mbfs --cr", "_mbfs") == ["--create"]
    assert complete("mbfs --pro", "_mbfs") == ["--profile"]
    assert complete("mbexec --ti", "_mbexec") == ["--timeout"]
    assert sorted(complete("mbexec --mo", "_mbexec")) == ["--mode", "--mount"]


def test_values():
    assert complete("mbfs --create --size ", "_mbfs") == ["lite", "small", "medium", "large", "xl"]
    assert complete("mbfs --size m", "_mbfs") == ["medium"]
    # --size=m: bash replaces only what follows '='
    assert complete("mbfs --size=m", "_mbfs") == ["medium"]
    assert "python" in complete("mbfs --catalog ", "_mbfs")
    assert complete("mbexec --mode ma", "_mbexec") == ["managed"]
    assert complete("mbfs -o ro,bulk", "_mbfs") == ["ro,bulk_read="]
    assert complete("mbfs -o attr_t", "_mbfs") == ["attr_timeout="]


def test_profile_names(tmp_path):
    cfg = tmp_path / "mainbrella"
    cfg.mkdir()
    (cfg / "config").write_text("[default]\nurl = https://api.mainbrella.com\n"
                                "# [commented]\n[local]\nurl = http://127.0.0.1:8787\n"
                                "[ lab-2 ]\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert complete("mbfs --profile ", "_mbfs", env) == ["default", "local", "lab-2"]
    assert complete("mbfs --profile l", "_mbfs", env) == ["local", "lab-2"]
    assert complete("mbexec --profile lo", "_mbexec", env) == ["local"]
    assert complete("mbexec --profile=d", "_mbexec", env) == ["default"]
    assert complete("mbfs -o ro,profile=la", "_mbfs", env) == ["lab-2"]
    # HOME's when XDG_CONFIG_HOME is not set
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    os.symlink(cfg, home / ".config" / "mainbrella")
    assert complete("mbfs --profile d", "_mbfs", {"XDG_CONFIG_HOME": "", "HOME": str(home)}) \
        == ["default"]


def test_mountpoints_and_commands(tmp_path):
    (tmp_path / "sb").mkdir()
    (tmp_path / "sbfile").write_text("")
    want = [str(tmp_path / "sb")]
    assert complete("mbfs c1 %s/s" % tmp_path, "_mbfs") == want
    assert complete("mbfs --create %s/s" % tmp_path, "_mbfs") == want
    assert complete("mbexec --mount %s/s" % tmp_path, "_mbexec") == want
    assert "mbexec" in complete("mbexec -t mbexe", "_mbexec")


def test_containers_come_from_list(service, container):
    """The CONTAINER argument and --stop's ID@GENERATION are completed from
    `mbfs --list` against the service."""
    cid, gen = container["id"], container["createdAt"]
    env = {"MAINBRELLA_API_URL": service.url, "MAINBRELLA_API_KEY": service.key}
    words = complete("mbfs ", "_mbfs", env=env)
    assert cid in words, words
    stop = complete("mbfs --stop %s" % cid[:1], "_mbfs", env=env)
    assert "%s@%s" % (cid, gen) in stop, stop


def help_options(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, timeout=30).stdout.decode()
    # mbfs: only its own part, not libfuse's
    out = out.split("\nFUSE options:")[0]
    longs = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", out))
    mopts = set(re.findall(r"-o ([a-z_]+)", out))
    return longs, mopts


@pytest.mark.parametrize("name", ["mbfs", "mbexec"])
def test_every_help_option_is_completed(name):
    binary = mbtest.MBFS if name == "mbfs" else mbtest.MBEXEC
    longs, mopts = help_options(binary)
    assert "--profile" in longs and "--help" in longs
    bash = open(BASH).read()
    zsh = open(ZSH[name]).read()
    for opt in sorted(longs):
        assert re.search(re.escape(opt) + r"(?![\w-])", bash), "%s %s not in %s" % (name, opt, BASH)
        assert re.search(re.escape(opt) + r"(?![\w-])", zsh), "%s %s not in %s" % (name, opt, ZSH[name])
    for opt in sorted(mopts):
        assert re.search(r"\b%s\b" % opt, bash), "-o %s not in %s" % (opt, BASH)
        assert re.search(r"'%s\[" % opt, zsh), "-o %s not in %s" % (opt, ZSH[name])


@pytest.mark.parametrize("name", ["mbfs", "mbexec"])
def test_zsh_scripts_parse(name):
    text = open(ZSH[name]).read()
    assert text.startswith("#compdef %s\n" % name)
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed: only the text of %s was checked" % ZSH[name])
    r = subprocess.run(["zsh", "-n", ZSH[name]], capture_output=True)
    assert r.returncode == 0, r.stderr


class Zsh:
    """An interactive `zsh -f` on a terminal with this tree's completion
    functions on its fpath, as a user gets after `compinit`."""

    def __init__(self, env):
        e = dict(os.environ, TERM="dumb", PS1="%% ")
        e["PATH"] = os.path.dirname(mbtest.MBFS) + ":" + os.path.dirname(mbtest.MBEXEC) + ":" + e["PATH"]
        e.update(env)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe("zsh", ["zsh", "-f", "-i"], e)
        self.send("fpath=(%s $fpath); autoload -Uz compinit; compinit -u -D; echo compinit-$((6*7))\n"
                  % COMPL)
        self.read_until("compinit-42")

    def send(self, text):
        os.write(self.fd, text.encode())

    def read_until(self, *words):
        """What the terminal shows until every word has shown (the timeout
        is only a guard against a hang)."""
        seen = b""
        deadline = time.monotonic() + 30
        while not all(w.encode() in seen for w in words):
            assert time.monotonic() < deadline, (words, seen)
            if select.select([self.fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, (words, seen)
                seen += chunk
        return seen.decode(errors="replace")

    def tab(self, line, *words):
        """Type line, press Tab, wait for words; then clear the line."""
        self.send(line + "\t")
        shown = self.read_until(*words)
        self.send("\x15")   # Ctrl-U: kill the line
        return shown

    def close(self):
        self.send("\x15exit\n")
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def test_zsh_completes_options_values_and_containers(service, container, tmp_path):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed (apt-get install zsh)")
    cid, gen = container["id"], container["createdAt"]
    z = Zsh({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path),
             "MAINBRELLA_API_URL": service.url, "MAINBRELLA_API_KEY": service.key})
    try:
        # a unique option is completed in place
        z.tab("mbfs --sta", "mbfs --status ")
        z.tab("mbexec --ti", "mbexec --timeout")
        z.tab("mbfs -o attr_", "mbfs -o attr_timeout=")
        z.tab("mbexec --mode ma", "mbexec --mode managed ")
        # several: listed
        shown = z.tab("mbfs --create --size ", "lite", "small", "medium", "large", "xl")
        shown = z.tab("mbexec --mo", "--mode", "--mount")
        # --stop takes ID@GENERATION only: the one running sandbox is
        # completed whole, from `mbfs --list`
        z.tab("mbfs --stop %s" % cid[:1], "mbfs --stop %s@%s" % (cid, gen))
    finally:
        z.close()
