/* guest.c: build the exec strategy's guest scripts; parse their reports.
 *
 * The scripts run under `/bin/sh -lc` (dash on Debian images), so they stick
 * to POSIX sh plus coreutils (stat -c, tail -c, head -c, base64) and
 * util-linux setsid. Why the process tree looks the way it does:
 *  - the foreground exec runs under `timeout`, which kills its own process
 *    group when it fires: the run is started with `setsid -f` (new session);
 *  - a non-interactive shell starts `&` jobs with SIGINT ignored, and the
 *    command would inherit that: the wrapper and the command are started in
 *    the foreground (setsid -f forks for us), only helpers go to background;
 *  - the command gets a session of its own, so `kill -INT -PGID` reaches it
 *    and its children but not the wrapper, which records `$?` (128+N after
 *    signal N) in rc.
 *  - the launch is already a login shell (`sh -lc`): the command inherits
 *    its exported environment and runs under plain `sh -c`, which saves a
 *    second pass through the profile on every command.
 * See guest.h for the files of a run directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "shim/guest.h"
#include "shim/result.h"

/* rep OO EO: one report from offsets (sets all=1 when it holds the end).
 * A finished run keeps its small files until the sweep, so a lost answer
 * can be fetched again; the client removes big ones. Process spawns are
 * the cost here, so the common case (all output from offset 0) is one
 * stat and one base64 per non-empty stream. */
static const char funcs[] =
	"rep() {\n"
	"all=0\n"
	"if [ -s \"$R/result\" ]; then cat \"$R/result\"; return 0; fi\n"
	"if [ ! -d \"$R\" ]; then echo '@mbx gone'; return 0; fi\n"
	"st=running; rc=-\n"
	"if [ -s \"$R/rc\" ]; then st=done; read -r rc <\"$R/rc\"; fi\n"
	"os=0; es=0; ip=0\n"
	"if [ -s \"$R/out\" ] || [ -s \"$R/err\" ]; then\n"
	"set -- \"$1\" \"$2\" $(stat -c %s \"$R/out\" \"$R/err\" 2>/dev/null)\n"
	"os=${3:-0}; es=${4:-0}\n"
	"fi\n"
	"[ -s \"$R/in.pos\" ] && read -r ip <\"$R/in.pos\"\n"
	"en=$((es - $2)); [ $en -gt 327680 ] && en=327680; [ $en -lt 0 ] && en=0\n"
	"on=$((os - $1)); [ $on -gt $((655360 - en)) ] && on=$((655360 - en))\n"
	"[ $on -lt 0 ] && on=0\n"
	"echo \"@mbx $st $rc $os $es ${ip:-0} $1 $on $2 $en\"\n"
	"if [ $on = $os ] && [ $on -gt 0 ]; then base64 \"$R/out\"\n"
	"elif [ $on -gt 0 ]; then tail -c +$(($1 + 1)) \"$R/out\" | head -c $on | base64; fi\n"
	"echo @e\n"
	"if [ $en = $es ] && [ $en -gt 0 ]; then base64 \"$R/err\"\n"
	"elif [ $en -gt 0 ]; then tail -c +$(($2 + 1)) \"$R/err\" | head -c $en | base64; fi\n"
	"echo @end\n"
	"[ $st = done ] && [ $(($1 + on)) -eq $os ] && [ $(($2 + en)) -eq $es ] && all=1\n"
	"if [ $all = 1 ] && [ -p \"$R/fifo\" ]; then rm -f \"$R/in\" \"$R/fifo\" \"$R\"/in.[0-9]*; fi\n"
	"return 0\n"
	"}\n";

/* The guest stdin reader (cwd: the run directory): cat chunk files into
 * the FIFO in order, count them in in.pos, stop after in.eof's count. */
static const char reader[] =
	"exec >fifo || exit 0\n"
	"i=0; f=in.000000\n"
	"while :; do\n"
	"if [ -f $f ]; then\n"
	"cat $f || exit 0\n"
	"rm -f $f; i=$((i + 1)); echo $i >in.pos.t && mv -f in.pos.t in.pos\n"
	"f=in.$(printf %06d $i)\n"
	"elif [ -f in.eof ] && read -r n <in.eof && [ $i -ge \"$n\" ]; then exit 0\n"
	"else sleep 0.05; fi\n"
	"done\n";

/* The wrapper: $1 run dir, $2 cwd, $3 script, $4 stdin mode, $5 guard
 * seconds; fd 3, when open, is a pipe to the waiting launch. Runs as a
 * session leader; starts the command in a session of its own (foreground, so
 * SIGINT is not ignored), then records rc (one write, so a non-empty rc is
 * complete) and wakes the launch (SIGPIPE ignored by then: it may be gone).
 * The command's redirections happen in its own shell: dash applies a simple
 * command's redirections in the parent while it waits, and would then write
 * its "Killed" notice into the command's stderr. */
static const char wrapper_head[] =
	"cd \"$1\" || exit 1\n"
	"rp=; gp=; in=/dev/null\n"
	"case $4 in\n"
	"embed) in=in ;;\n"
	"stream) in=fifo\n"
	"setsid /bin/sh -c \"$RD\" mbexec-stdin </dev/null >/dev/null 2>&1 3>&- &\n"
	"rp=$! ;;\n"
	"esac\n"
	"if [ \"$5\" -gt 0 ]; then\n"
	"setsid /bin/sh -c 'sleep \"$1\"; read -r p <pgid && kill -KILL -$p' "
	"mbexec-guard \"$5\" </dev/null >/dev/null 2>&1 3>&- &\n"
	"gp=$!\n"
	"fi\n"
	"setsid /bin/sh -c 'echo $$ >pgid; exec <\"$3\" >out 2>err; "
	"cd \"$1\" && exec /bin/sh -c \"$2\"' mbexec-cmd \"$2\" \"$3\" $in 3>&-\n"
	"rc=$?\n"
	"[ -n \"$rp\" ] && kill -KILL -$rp 2>/dev/null\n"
	"[ -n \"$gp\" ] && kill -KILL -$gp 2>/dev/null\n"
	"[ -s wd ] && read -r w <wd && kill -KILL -$w 2>/dev/null\n"
	"echo $rc >rc\n"
	"trap '' PIPE\n"
	"echo d >&3\n";

/* The watchdog ($1: run dir), started at the end of a launch whose command
 * still runs (or by the first poll), so only runs that outlive their launch
 * have one: every poll (and the client's heartbeat
 * while it cannot poll) touches hb; after MBX_ORPHAN_S seconds without
 * one ($2, checked in quarters), mbexec is taken to be gone (killed with
 * SIGKILL, machine lost) and the command is ended as a dropped ssh session
 * would end it. */
static const char watchdog[] =
	"cd \"$1\" || exit 0\n"
	"echo $$ >wd\n"
	"miss=0\n"
	"step=$(($2 / 4))\n"
	"while [ ! -s rc ]; do\n"
	": >wd.t\n"
	"sleep $step\n"
	"[ -s rc ] && exit 0\n"
	"if [ hb -nt wd.t ]; then miss=0; else miss=$((miss + 1)); fi\n"
	"if [ $miss -ge 4 ] && read -r p <pgid; then\n"
	"kill -HUP -$p 2>/dev/null; kill -TERM -$p 2>/dev/null; sleep 5\n"
	"kill -KILL -$p 2>/dev/null; exit 0\n"
	"fi\n"
	"done\n";

/* Old runs: finished, or whose command group is gone, after 60 min. Run on
 * about one launch in 16 (by pid), in the background. */
static const char sweep[] =
	"if [ $(($$ % 16)) = 0 ]; then\n"
	"(find " MBX_RUN_BASE " -mindepth 1 -maxdepth 1 -mmin +60 2>/dev/null |\n"
	"while IFS= read -r d; do\n"
	"p=999999999; [ -s \"$d/pgid\" ] && read -r p <\"$d/pgid\"\n"
	"if [ ! -d \"$d\" ] || [ -s \"$d/rc\" ] || [ -s \"$d/result\" ] ||"
	" ! kill -0 -$p 2>/dev/null; then rm -rf \"$d\"; fi\n"
	"done) </dev/null >/dev/null 2>&1 &\n"
	"fi\n";

int mbx_sh_assign(struct mb_buf *b, const char *var, const char *value)
{
	char *b64 = NULL;
	size_t n;
	int r;

	if (mbx_utf8_valid(value, strlen(value))) {
		r = mb_buf_appendf(b, "%s=", var);
		r = r ? r : mb_buf_append_shq(b, value);
		return r ? r : mb_buf_appends(b, "\n");
	}
	/* the exec body is JSON, so UTF-8 only: other bytes travel as base64
	 * (the trailing x keeps trailing newlines through $(...)) */
	r = mb_base64_encode(value, strlen(value), &b64, &n);
	r = r ? r : mb_buf_appendf(b, "%s=$(printf %%s '%s' | base64 -d; echo x); "
				   "%s=${%s%%x}\n", var, b64, var, var);
	free(b64);
	return r;
}

/* Append: the client is alive (hb), and the run's watchdog is started if
 * it has none yet (only runs that outlive their launch get one). */
static int alive(struct mb_buf *b, unsigned orphan_s)
{
	int r = mb_buf_appends(b,
		"if [ -d \"$R\" ] && [ ! -s \"$R/rc\" ] && [ ! -s \"$R/result\" ]; then\n"
		": >\"$R/hb\"\n"
		"if [ ! -e \"$R/wd\" ]; then\n"
		": >\"$R/wd\"\n"
		"W=");

	r = r ? r : mb_buf_append_shq(b, watchdog);
	return r ? r : mb_buf_appendf(b,
		"\nsetsid -f /bin/sh -c \"$W\" mbexec-watchdog \"$R\" %u"
		" </dev/null >/dev/null 2>&1\n"
		"fi\n"
		"fi\n", orphan_s >= 4 ? orphan_s : 4);
}

static int run_dir(struct mb_buf *b, const char *run_id)
{
	return mb_buf_appendf(b, "R=%s/%s\n", MBX_RUN_BASE, run_id);
}

static const char *in_mode_name(enum mbx_in_mode m)
{
	return m == MBX_IN_EMBED ? "embed" : m == MBX_IN_STREAM ? "stream" : "none";
}

/* The launch: creating $R is the guard (a retried launch only reports).
 * The fresh one waits for the wrapper's line on a pipe (its fd 3), or for a
 * timer's line on the same pipe, whichever comes first: no polling, no
 * process spawned per check. */
int mbx_guest_launch(struct mb_buf *b, const struct mbx_launch *l)
{
	struct mb_buf w;
	char *b64 = NULL;
	size_t b64len;
	int r = 0;

	mb_buf_init(&w, MBX_REPORT_RAW);
	/* the wrapper, with the reader inlined as $RD */
	r = r ? r : mb_buf_appends(&w, "RD=");
	r = r ? r : mb_buf_append_shq(&w, reader);
	r = r ? r : mb_buf_appends(&w, "\n");
	r = r ? r : mb_buf_appends(&w, wrapper_head);

	r = r ? r : run_dir(b, l->run_id);
	r = r ? r : mb_buf_appends(b, funcs);
	r = r ? r : mb_buf_appends(b,
		"new=0\n"
		"if mkdir -m 700 \"$R\" 2>/dev/null ||"
		" { mkdir -p -m 700 " MBX_RUN_BASE " 2>/dev/null &&"
		" mkdir -m 700 \"$R\" 2>/dev/null; }; then\n"
		"new=1\n");
	r = r ? r : mbx_sh_assign(b, "C", l->cwd);
	if (l->script) {
		r = r ? r : mbx_sh_assign(b, "S", l->script);
	} else {
		r = r ? r : mb_buf_appends(b, "S=$(cat ");
		r = r ? r : mb_buf_append_shq(b, l->script_path);
		r = r ? r : mb_buf_appends(b, ") && rm -f ");
		r = r ? r : mb_buf_append_shq(b, l->script_path);
		r = r ? r : mb_buf_appends(b, "\n");
	}
	r = r ? r : mb_buf_appends(b,
		"if [ ! -d \"$C\" ]; then echo '@mbx nocwd' >\"$R/result\"\n"
		"elif ! command -v setsid >/dev/null 2>&1; then\n"
		"echo '@mbx fail setsid-missing' >\"$R/result\"\n"
		"else\n"
		": >\"$R/out\"; : >\"$R/err\"\n");
	if (!r && l->in_mode == MBX_IN_EMBED) {
		if (l->in_len == 0) {
			r = mb_buf_appends(b, ": >\"$R/in\"\n");
		} else {
			r = mb_base64_encode(l->in_data, l->in_len, &b64, &b64len);
			r = r ? r : mb_buf_appendf(b, "printf %%s '%s' | base64 -d >\"$R/in\"\n", b64);
		}
	} else if (!r && l->in_mode == MBX_IN_STREAM) {
		r = mb_buf_appends(b, "mkfifo \"$R/fifo\"\n");
	}
	r = r ? r : mb_buf_appends(b, "W=");
	r = r ? r : mb_buf_append_shq(b, w.data);
	r = r ? r : mb_buf_appendf(b, "\nA=\"%s %u\"\n", in_mode_name(l->in_mode),
				   l->guard_s);
	r = r ? r : mb_buf_appends(b, sweep);
	r = r ? r : mb_buf_appends(b,
		"fi\n"
		"elif [ ! -d \"$R\" ]; then echo '@mbx fail mkdir'; exit 0\n"
		"fi\n"
		"if [ $new = 1 ] && [ ! -s \"$R/result\" ]; then\n");
	if (l->wait_ms) {
		r = r ? r : mb_buf_appendf(b,
			"{ setsid -f /bin/sh -c \"$W\" mbexec-run \"$R\" \"$C\" \"$S\" $A"
			" 3>&1 </dev/null >/dev/null 2>&1 ||"
			" echo '@mbx fail setsid-failed' >\"$R/result\"\n"
			"(sleep %u.%03u; echo t) 2>/dev/null &\n"
			"} | read -r x\n"
			"else\n"
			"i=0\n"
			"while [ $i -lt %u ] && [ ! -s \"$R/rc\" ] && [ ! -s \"$R/result\" ]; do"
			" sleep 0.05; i=$((i + 1)); done\n"
			"fi\n",
			l->wait_ms / 1000, l->wait_ms % 1000, l->wait_ms / 50);
	} else {
		r = r ? r : mb_buf_appends(b,
			"setsid -f /bin/sh -c \"$W\" mbexec-run \"$R\" \"$C\" \"$S\" $A"
			" </dev/null >/dev/null 2>&1 ||"
			" echo '@mbx fail setsid-failed' >\"$R/result\"\n"
			"fi\n");
	}
	r = r ? r : mb_buf_appends(b,
		"if [ $new = 0 ] && [ ! -s \"$R/pgid\" ] && [ ! -s \"$R/rc\" ] &&"
		" [ ! -s \"$R/result\" ]; then echo '@mbx lost'; exit 0; fi\n");
	r = r ? r : alive(b, l->orphan_s);
	r = r ? r : mb_buf_appends(b, "rep 0 0\n");
	free(b64);
	mb_buf_release(&w);
	return r;
}

/* The long poll: one stat to see whether anything is pending already; if
 * not, a marker file is touched and the loop waits with builtin tests only
 * (out, err or in.pos newer than the marker, rc written, or the timer's
 * .tick newer: wall-clock bound however slow process creation is), so each
 * 50 ms step costs one process (sleep), not two. */
int mbx_guest_poll(struct mb_buf *b, const char *run_id, uint64_t oo,
		   uint64_t eo, long in_pos, unsigned wait_ms, unsigned orphan_s)
{
	int r = run_dir(b, run_id);

	r = r ? r : mb_buf_appends(b, funcs);
	r = r ? r : alive(b, orphan_s);
	r = r ? r : mb_buf_appendf(b,
		"if [ -d \"$R\" ] && [ ! -s \"$R/rc\" ] && [ ! -s \"$R/result\" ]; then\n"
		"set -- $(stat -c %%s \"$R/out\" \"$R/err\" 2>/dev/null)\n"
		"p=0; [ -s \"$R/in.pos\" ] && read -r p <\"$R/in.pos\"\n"
		"if [ \"${1:-0}\" -le %llu ] && [ \"${2:-0}\" -le %llu ] &&"
		" { [ %ld -lt 0 ] || [ \"$p\" = %ld ]; }; then\n"
		": >\"$R/.mark\"\n"
		"(sleep %u.%03u; : >\"$R/.tick\") </dev/null >/dev/null 2>&1 &\n"
		"tp=$!; i=0\n"
		"while [ $i -lt %u ] && [ ! -s \"$R/rc\" ] && [ -d \"$R\" ] &&"
		" ! [ \"$R/.tick\" -nt \"$R/.mark\" ] &&"
		" ! [ \"$R/out\" -nt \"$R/.mark\" ] && ! [ \"$R/err\" -nt \"$R/.mark\" ] &&"
		" { [ %ld -lt 0 ] || ! [ \"$R/in.pos\" -nt \"$R/.mark\" ]; }; do"
		" sleep 0.05; i=$((i + 1)); done\n"
		"kill $tp 2>/dev/null\n"
		"fi\n"
		"fi\n"
		"rep %llu %llu\n",
		(unsigned long long)oo, (unsigned long long)eo, in_pos, in_pos,
		wait_ms / 1000, wait_ms % 1000, 2 * wait_ms / 50 + 1, in_pos,
		(unsigned long long)oo, (unsigned long long)eo);
	return r;
}

int mbx_guest_signal(struct mb_buf *b, const char *run_id, const char *how)
{
	int r = run_dir(b, run_id);

	/* the command may not have written pgid yet: wait up to 1 s */
	r = r ? r : mb_buf_appends(b,
		"i=0\n"
		"while [ $i -lt 50 ] && [ -d \"$R\" ] && [ ! -s \"$R/pgid\" ] &&"
		" [ ! -s \"$R/rc\" ] && [ ! -s \"$R/result\" ]; do"
		" sleep 0.02; i=$((i + 1)); done\n"
		"p=; [ -s \"$R/pgid\" ] && read -r p <\"$R/pgid\"\n"
		"if [ -z \"$p\" ] || [ -s \"$R/rc\" ] || [ -s \"$R/result\" ]; then"
		" echo '@mbx ack ended'; exit 0; fi\n");
	if (!r && !strcmp(how, "INT"))
		r = mb_buf_appends(b, "kill -INT -$p 2>/dev/null\n");
	else if (!r)
		r = mb_buf_appends(b,
			"kill -TERM -$p 2>/dev/null\n"
			"i=0\n"
			"while [ $i -lt 20 ] && kill -0 -$p 2>/dev/null; do"
			" sleep 0.1; i=$((i + 1)); done\n"
			"kill -KILL -$p 2>/dev/null\n");
	r = r ? r : mb_buf_appends(b, "echo '@mbx ack sent'\n");
	return r;
}

int mbx_guest_heartbeat(struct mb_buf *b, const char *run_id)
{
	int r = run_dir(b, run_id);

	return r ? r : mb_buf_appends(b, "[ -d \"$R\" ] && : >\"$R/hb\"\n"
				      "echo '@mbx ack hb'\n");
}

int mbx_guest_cleanup(struct mb_buf *b, const char *run_id)
{
	int r = run_dir(b, run_id);

	return r ? r : mb_buf_appends(b, "rm -rf \"$R\"\necho '@mbx ack clean'\n");
}

/* ---- reports ---- */

void mbx_report_release(struct mbx_report *rep)
{
	free(rep->out_data);
	free(rep->err_data);
	memset(rep, 0, sizeof(*rep));
}

/* The last line starting with "@mbx " (profiles may print before us). */
static const char *find_header(const char *text, size_t len)
{
	const char *p, *last = NULL;

	for (p = text; p && p < text + len; ) {
		if ((size_t)(text + len - p) >= 5 && !memcmp(p, "@mbx ", 5))
			last = p;
		p = memchr(p, '\n', (size_t)(text + len - p));
		if (p)
			p++;
	}
	return last;
}

/* Decode the base64 between from and to (exclusive) into *out. */
static int decode(const char *from, const char *to, unsigned char **out,
		  size_t *n)
{
	*out = NULL;
	*n = 0;
	if (to <= from)
		return 0;
	return mb_base64_decode(from, (size_t)(to - from), out, n);
}

int mbx_report_parse(const char *text, size_t len, struct mbx_report *rep)
{
	unsigned long long os, es, oo, on, eo, en;
	const char *h, *eol, *e, *end;
	char st[16], rc[16];
	long ip;
	int n;

	memset(rep, 0, sizeof(*rep));
	h = find_header(text, len);
	if (!h)
		return -EPROTO;
	eol = memchr(h, '\n', (size_t)(text + len - h));
	if (!eol)
		eol = text + len;
	if (sscanf(h, "@mbx %15s", st) != 1)
		return -EPROTO;
	if (!strcmp(st, "gone") || !strcmp(st, "lost") || !strcmp(st, "nocwd") ||
	    !strcmp(st, "ack")) {
		rep->state = st[0] == 'g' ? MBX_ST_GONE : st[0] == 'l' ? MBX_ST_LOST :
			     st[0] == 'n' ? MBX_ST_NOCWD : MBX_ST_OTHER;
		return 0;
	}
	if (!strcmp(st, "fail")) {
		rep->state = MBX_ST_FAIL;
		if (sscanf(h, "@mbx fail %63s", rep->fail) != 1)
			strcpy(rep->fail, "unknown");
		return 0;
	}
	if (strcmp(st, "running") && strcmp(st, "done"))
		return -EPROTO;
	n = sscanf(h, "@mbx %15s %15s %llu %llu %ld %llu %llu %llu %llu",
		   st, rc, &os, &es, &ip, &oo, &on, &eo, &en);
	if (n != 9)
		return -EPROTO;
	rep->state = st[0] == 'd' ? MBX_ST_DONE : MBX_ST_RUNNING;
	if (rep->state == MBX_ST_DONE) {
		char *x;
		long v = strtol(rc, &x, 10);

		if (*x || x == rc || v < 0 || v > 255)
			return -EPROTO;
		rep->rc = (int)v;
	}
	rep->out_size = os;
	rep->err_size = es;
	rep->in_pos = ip;
	rep->out_off = oo;
	rep->err_off = eo;
	/* out data up to "\n@e\n", err data up to "\n@end" */
	e = eol;
	while (e < text + len && !(e[0] == '\n' && !strncmp(e + 1, "@e\n", 3)))
		e++;
	if (e >= text + len)
		return -EPROTO;
	end = e + 1;
	while (end < text + len && !(end[0] == '\n' && !strncmp(end + 1, "@end", 4)))
		end++;
	if (end >= text + len)
		return -EPROTO;
	if (decode(eol, e, &rep->out_data, &rep->out_len) ||
	    decode(e + 4, end, &rep->err_data, &rep->err_len) ||
	    rep->out_len != on || rep->err_len != en) {
		mbx_report_release(rep);
		return -EPROTO;
	}
	rep->complete = rep->state == MBX_ST_DONE && oo + on == os && eo + en == es;
	return 0;
}
