/* journal_outbox.c: the journal's outbox log (journal.h): the queued
 * changes that are not a file's data, appended one line each.
 *
 * The file starts with a line "o" and the owner's JSON; then "+ID K MODE
 * SEC NSEC BASEKNOWN BSIZE BMTIME PATH" notes a change (a later "+" of
 * the same ID replaces it in place; a move's PATH is "LEN MVID LEDGER
 * FROMTO", LEN the bytes of FROM) and "-ID" says it is done. Appends
 * are single write(2)s with O_APPEND: a kill -9 leaves whole lines, a
 * power cut at worst a torn last line, which the reader drops. Once
 * nothing is pending the file is emptied, so it never grows for long. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/log.h"
#include "fuse/durable/journal.h"
#include "fuse/durable/journal_int.h"

#define OP_LINE_MAX (2 * MB_PATH_MAX + 180)

static int write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t w = write(fd, s, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The log open, its owner line written when it is empty. oplock held. */
static int open_log(struct mbfs_journal *j)
{
	struct stat st;
	if (j->opfd < 0) {
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/" OUTBOX_NAME, j->run) >= (int)sizeof(p))
			return -ENAMETOOLONG;
		j->opfd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (j->opfd < 0)
			return -errno;
	}
	if (fstat(j->opfd, &st))
		return -errno;
	if (st.st_size > 0)
		return 0;
	cJSON *o = cJSON_CreateObject();
	char *text = NULL, *line = NULL;
	int rc = -ENOMEM;
	if (o) {
		mbfs_journal_owner_json(j, o);
		text = cJSON_PrintUnformatted(o);
	}
	if (text && asprintf(&line, "o%s\n", text) >= 0)
		rc = write_all(j->opfd, line, strlen(line));
	free(line);
	free(text);
	cJSON_Delete(o);
	return rc;
}

static void failed(struct mbfs_journal *j, int rc)
{
	if (!j->op_failed)
		mb_log(MB_LOG_WARN, "cannot write the journal's outbox log in "
		       "'%s': %s; queued directory changes and removals would "
		       "not survive a crash", j->run, strerror(-rc));
	j->op_failed = true;
}

int mbfs_journal_op(struct mbfs_journal *j, const struct mbfs_jop *op,
		    unsigned *id)
{
	if (!j)
		return 0;
	bool move = op->kind == 'v';
	if (strchr(op->rpath, '\n') || (move && strchr(op->rto, '\n')))
		return -EINVAL;
	char line[OP_LINE_MAX], len_from[120] = "";
	if (move && (strspn(op->mv_id, "0123456789abcdef") != 16 ||
		     strncmp(op->ledger, "/tmp/", 5) != 0 ||
		     strpbrk(op->ledger, " \n")))
		return -EINVAL;
	if (move)
		snprintf(len_from, sizeof(len_from), "%zu %s %s ",
			 strlen(op->rpath), op->mv_id, op->ledger);
	pthread_mutex_lock(&j->oplock);
	bool fresh = *id == 0;
	if (fresh) {
		pthread_mutex_lock(&j->lock);
		*id = ++j->next_id;
		pthread_mutex_unlock(&j->lock);
	}
	int len = snprintf(line, sizeof(line), "+%u %c %o %lld %ld %d %" PRIu64
			   " %lld %s%s%s\n", *id, op->kind, op->mode & 07777,
			   (long long)op->mtime.tv_sec, op->mtime.tv_nsec,
			   op->base_known, op->base_size,
			   (long long)op->base_mtime, len_from, op->rpath,
			   move ? op->rto : "");
	int rc = len < 0 || len >= (int)sizeof(line) ? -ENAMETOOLONG
						     : open_log(j);
	if (!rc)
		rc = write_all(j->opfd, line, (size_t)len);
	if (!rc && fresh)
		j->ops_pending++;
	if (!rc)   /* the next commit syncs the log */
		mbfs_journal_commit_dirty(j);
	if (rc)
		failed(j, rc);
	if (rc && fresh)
		*id = 0;
	pthread_mutex_unlock(&j->oplock);
	return rc;
}

void mbfs_journal_op_done(struct mbfs_journal *j, unsigned id)
{
	if (!j || !id)
		return;
	char line[24];
	int len = snprintf(line, sizeof(line), "-%u\n", id);
	pthread_mutex_lock(&j->oplock);
	if (j->ops_pending)
		j->ops_pending--;
	int rc = j->opfd < 0 ? 0 : !j->ops_pending ? (ftruncate(j->opfd, 0) ? -errno : 0)
			   : write_all(j->opfd, line, (size_t)len);
	if (rc)
		failed(j, rc);
	pthread_mutex_unlock(&j->oplock);
}

/* ---- replay ---- */

struct oplist {
	struct mbfs_jop *v;
	unsigned *ids;
	size_t n, cap;
};

/* One "+" line into l (replacing its id's entry), or false when torn. */
static bool parse_add(const char *s, struct oplist *l)
{
	struct mbfs_jop op;
	unsigned id, mode;
	long long sec, bmt;
	long nsec;
	int bk, used = 0;
	uint64_t bsize;
	memset(&op, 0, sizeof(op));
	if (sscanf(s, "+%u %c %o %lld %ld %d %" SCNu64 " %lld %n", &id,
		   &op.kind, &mode, &sec, &nsec, &bk, &bsize, &bmt, &used) < 8 ||
	    !used || !op.kind || !strchr("MTCrRvp", op.kind))
		return false;
	size_t flen = 0;
	int more = 0;
	/* a move: "LEN MVID LEDGER FROMTO" (or, from before the ledger,
	 * "LEN FROMTO": no id, done as it comes) */
	if (op.kind == 'v' &&
	    (sscanf(s + used, "%zu %16[0-9a-f] %63s %n", &flen, op.mv_id,
		    op.ledger, &more) < 3 || !more ||
	     strlen(op.mv_id) != 16 || op.ledger[0] != '/')) {
		op.mv_id[0] = op.ledger[0] = '\0';
		more = 0;
		if (sscanf(s + used, "%zu %n", &flen, &more) < 1 || !more)
			return false;
	}
	if (op.kind == 'v' && (flen >= sizeof(op.rpath) ||
			       strlen(s + used + more) <= flen))
		return false;
	used += more;
	size_t plen = op.kind == 'v' ? flen : strlen(s + used);
	if (s[used] != '/' || plen >= sizeof(op.rpath) ||
	    (op.kind == 'v' && (s[used + plen] != '/' ||
				strlen(s + used + plen) >= sizeof(op.rto))))
		return false;
	snprintf(op.rpath, sizeof(op.rpath), "%.*s", (int)plen, s + used);
	if (op.kind == 'v')
		snprintf(op.rto, sizeof(op.rto), "%s", s + used + plen);
	op.mode = mode & 07777;
	op.mtime.tv_sec = (time_t)sec;
	op.mtime.tv_nsec = nsec >= 0 && nsec < 1000000000L ? nsec : 0;
	op.base_known = bk != 0;
	op.base_size = bsize;
	op.base_mtime = (time_t)bmt;
	for (size_t i = 0; i < l->n; i++) {
		if (l->ids[i] == id) {
			l->v[i] = op;
			return true;
		}
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct mbfs_jop *v = realloc(l->v, cap * sizeof(*v));
		if (v)
			l->v = v;
		unsigned *ids = v ? realloc(l->ids, cap * sizeof(*ids)) : NULL;
		if (!ids)
			return false;
		l->ids = ids;
		l->cap = cap;
	}
	l->v[l->n] = op;
	l->ids[l->n++] = id;
	return true;
}

static void parse_done(const char *s, struct oplist *l)
{
	unsigned id;
	if (sscanf(s, "-%u", &id) != 1)
		return;
	for (size_t i = 0; i < l->n; i++) {
		if (l->ids[i] == id) {
			memmove(l->v + i, l->v + i + 1, (l->n - i - 1) * sizeof(*l->v));
			memmove(l->ids + i, l->ids + i + 1,
				(l->n - i - 1) * sizeof(*l->ids));
			l->n--;
			return;
		}
	}
}

void mbfs_journal_replay_outbox(struct mbfs_journal *j, const char *dir,
				const struct mbfs_jreplay *ops, bool *foreign)
{
	char p[PATH_MAX], line[OP_LINE_MAX + 2];
	if (snprintf(p, sizeof(p), "%s/" OUTBOX_NAME, dir) >= (int)sizeof(p))
		return;
	FILE *f = fopen(p, "re");
	if (!f)
		return;
	struct oplist l = { 0 };
	struct mbfs_jrec owner;
	bool have_owner = false;
	memset(&owner, 0, sizeof(owner));
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (!len || line[len - 1] != '\n')
			break;   /* torn: the last line a power cut left */
		line[len - 1] = '\0';
		if (line[0] == 'o' && !have_owner) {
			cJSON *o = cJSON_Parse(line + 1);
			have_owner = cJSON_IsObject(o) &&
				     mbfs_journal_parse_owner(o, &owner);
			cJSON_Delete(o);
		} else if (line[0] == '+' && have_owner) {
			if (!parse_add(line, &l))
				break;
		} else if (line[0] == '-') {
			parse_done(line, &l);
		}
	}
	fclose(f);
	enum mbfs_jact act = MBFS_J_DONE;   /* empty or unreadable */
	if (have_owner && l.n) {
		if (!mbfs_journal_same_container(j, &owner)) {
			*foreign = true;
			act = MBFS_J_LEAVE;
		} else {
			act = ops->outbox(ops->ud, &owner, l.v, l.n);
		}
	}
	if (act == MBFS_J_DONE)
		unlink(p);
	free(l.v);
	free(l.ids);
}
