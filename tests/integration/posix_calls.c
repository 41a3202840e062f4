/*
 * posix_calls.c - a transcript of POSIX calls made in a folder, to compare
 * two filesystems call for call.
 *
 * Makes a fixed sequence of system calls in FOLDER (empty, on the
 * filesystem under test): as root, and in forked children as two other
 * users, 1000 (also in group 1001) and 65534, switched with setgroups,
 * setresgid and setresuid.  Each call is one line: its section and number,
 * who made it, the call as written here, and what it returned (-1 and the
 * errno's name on failure).  A stat line gives what two filesystems must
 * agree on: type, mode, owner, group, link count, size, device numbers, and
 * mtime and ctime as "new" or "old" against the last mark (a mark is taken
 * before a change, then 20 ms pass, so anything stamped before the mark is
 * older than it and anything after is newer whatever the clock's tick).
 * Inode numbers, device ids and times never set by a call are not printed:
 * they differ between filesystems by design.
 *
 * posix_ext4_test.sh runs this on ext4 and on an mlfs datastore whose root
 * is on that ext4, and compares the transcripts line by line.
 *
 * Usage: posix_calls FOLDER (as root).  Exits 0 once the transcript is
 * written, whatever the calls answered; 1 when it cannot run at all.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define U1 1000		/* a user, also in group U1_EXTRA */
#define U1_EXTRA 1001
#define U2 65534	/* nobody */

static const char *calls_who = "root";
static const char *calls_sec = "-";
static unsigned int *calls_n;	/* shared with the children: numbers go on */
static struct timespec calls_mark;

/* Prints the head of a line: "SECTION.N WHO ". */
static void calls_head(void)
{
	printf("%s.%03u %s ", calls_sec, ++*calls_n, calls_who);
}

/* Records a call described by @what that returned @ret; returns @ret, errno kept. */
static long calls_rec(long ret, int err, const char *what, int is_fd)
{
	calls_head();
	if (ret < 0)
		printf("%s = -1 %s\n", what, strerrorname_np(err));
	else if (is_fd)
		printf("%s = fd\n", what);
	else
		printf("%s = %ld\n", what, ret);
	errno = err;
	return ret;
}

/* DO records a call's return; FD one that returns a descriptor (printed as "fd"). */
#define DO(call) ({ errno = 0; long r_ = (long)(call); calls_rec(r_, errno, #call, 0); })
#define FD(call) ((int)({ errno = 0; long r_ = (long)(call); calls_rec(r_, errno, #call, 1); }))

static void calls_section(const char *name)
{
	calls_sec = name;
	umask(022);
}

/* From now on, times stamped before are "old", after "new". */
static void calls_tmark(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	clock_gettime(CLOCK_REALTIME, &calls_mark);
	nanosleep(&pause, NULL);
}

static const char *calls_age(const struct timespec *t)
{
	if (t->tv_sec != calls_mark.tv_sec)
		return t->tv_sec > calls_mark.tv_sec ? "new" : "old";
	return t->tv_nsec >= calls_mark.tv_nsec ? "new" : "old";
}

static const char *calls_type(mode_t m)
{
	return S_ISREG(m) ? "reg" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "lnk" : S_ISFIFO(m) ? "fifo"
	     : S_ISSOCK(m) ? "sock" : S_ISCHR(m) ? "chr" : S_ISBLK(m) ? "blk" : "?";
}

/* The fields of @st two filesystems must agree on. */
static void calls_print_stat(const struct stat *st)
{
	printf(" %s %04o %u:%u n%lu", calls_type(st->st_mode), (unsigned int)(st->st_mode & 07777),
	       (unsigned int)st->st_uid, (unsigned int)st->st_gid, (unsigned long)st->st_nlink);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		printf(" rdev %u,%u", major(st->st_rdev), minor(st->st_rdev));
	else if (!S_ISDIR(st->st_mode))
		printf(" s%lld", (long long)st->st_size);
	printf(" m:%s c:%s\n", calls_age(&st->st_mtim), calls_age(&st->st_ctim));
}

/* One line of what a stat call (@ret, errno) gave in @st. */
static void calls_stat_line(const char *call, const char *what, int ret, const struct stat *st)
{
	int err = errno;

	calls_head();
	if (ret < 0) {
		printf("%s %s = -1 %s\n", call, what, strerrorname_np(err));
		return;
	}
	printf("%s %s =", call, what);
	calls_print_stat(st);
}

static void calls_stat(const char *path)
{
	struct stat st;

	calls_stat_line("stat", path, lstat(path, &st), &st);
}

static void calls_fstat(int fd, const char *what)
{
	struct stat st;

	calls_stat_line("fstat", what, fstat(fd, &st), &st);
}

/* The times of @path exactly, for times a call set. */
static void calls_times(const char *path)
{
	struct stat st;
	int err = lstat(path, &st) < 0 ? errno : 0;

	calls_head();
	if (err)
		printf("times %s = -1 %s\n", path, strerrorname_np(err));
	else
		printf("times %s = a %lld.%09ld m %lld.%09ld\n", path, (long long)st.st_atim.tv_sec,
		       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* What @path holds (64 bytes at most), or the errno of opening or reading it. */
static void calls_content(const char *path)
{
	char buf[65] = { 0 };
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	int err = errno;

	if (fd >= 0)
		close(fd);
	calls_head();
	if (n < 0)
		printf("content %s = -1 %s\n", path, strerrorname_np(err));
	else
		printf("content %s = \"%s\"\n", path, buf);
}

static int calls_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in @dir, sorted, each with its d_type; "." and ".." left out. */
static void calls_list(const char *dir)
{
	static const char types[] = { [DT_REG] = 'f', [DT_DIR] = 'd', [DT_LNK] = 'l',
				      [DT_FIFO] = 'p', [DT_SOCK] = 's', [DT_CHR] = 'c',
				      [DT_BLK] = 'b', [DT_UNKNOWN] = '?' };
	char *names[256];
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;

	calls_head();
	if (!d) {
		printf("list %s = -1 %s\n", dir, strerrorname_np(errno));
		return;
	}
	while ((de = readdir(d)) && n < 256)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    asprintf(&names[n], "%s:%c", de->d_name,
			     de->d_type < sizeof(types) && types[de->d_type] ? types[de->d_type] : '?') > 0)
			n++;
	closedir(d);
	qsort(names, n, sizeof(names[0]), calls_name_cmp);
	printf("list %s =", dir);
	for (size_t i = 0; i < n; i++) {
		printf(" %s", names[i]);
		free(names[i]);
	}
	printf("\n");
}

/* Makes @path hold @data (created 0644 under umask 022), recorded. */
static void calls_write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n = fd < 0 ? -1 : write(fd, data, strlen(data));
	int err = errno;

	if (fd >= 0 && close(fd) < 0 && n >= 0) {
		n = -1;
		err = errno;
	}
	calls_head();
	if (n < 0)
		printf("write_file %s = -1 %s\n", path, strerrorname_np(err));
	else
		printf("write_file %s = %zd\n", path, n);
}

/* Runs @fn as @uid (group @uid, and @extra unless 0) in a child; its lines join the transcript. */
static void calls_as(uid_t uid, gid_t extra, const char *who, void (*fn)(void))
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		gid_t groups[1] = { extra };

		if (setgroups(extra ? 1 : 0, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(3);
		calls_who = who;
		fn();
		fflush(stdout);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "posix_calls: the child as %s failed\n", who);
		exit(1);
	}
}

#define AS_U1(fn) calls_as(U1, U1_EXTRA, "u1000", fn)
#define AS_U2(fn) calls_as(U2, 0, "u65534", fn)

/* ---- the folders every section works in ---- */

static void calls_folders(void)
{
	calls_section("setup");
	DO(mkdir("w", 0777));		/* anyone writes */
	DO(chmod("w", 0777));
	DO(mkdir("s", 0777));		/* sticky, root's */
	DO(chmod("s", 01777));
	DO(mkdir("r", 0755));		/* root's only */
	DO(mkdir("g", 0777));		/* setgid, group U1_EXTRA */
	DO(chown("g", 0, U1_EXTRA));
	DO(chmod("g", 02777));
	calls_stat("g");
	calls_write_file("r/private", "root only");
	DO(chmod("r/private", 0600));
	calls_write_file("r/public", "for all");
}

/* ---- open flags ---- */

static void calls_open_umasks(void)
{
	static const mode_t masks[] = { 022, 002, 077, 0, 027 };
	char name[32];

	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		umask(masks[i]);
		snprintf(name, sizeof(name), "w/um%03o", (unsigned int)masks[i]);
		close(FD(open(name, O_CREAT | O_WRONLY, 0666)));
		calls_stat(name);
		snprintf(name, sizeof(name), "w/umd%03o", (unsigned int)masks[i]);
		DO(mkdir(name, 0777));
		calls_stat(name);
	}
	umask(022);
}

static void calls_open_as_user(void)
{
	int fd;

	DO(open("r/private", O_RDONLY));
	DO(open("r/public", O_WRONLY));
	DO(open("r/public", O_RDONLY | O_TRUNC));
	DO(open("r/new", O_CREAT | O_WRONLY, 0644));
	DO(open("r/public", O_RDONLY | O_NOATIME));
	DO(open("r/public", O_CREAT | O_EXCL | O_WRONLY, 0644));
	close(FD(open("w/suid", O_CREAT | O_WRONLY, 04755)));
	calls_stat("w/suid");
	close(FD(open("w/sgid", O_CREAT | O_WRONLY, 02755)));
	calls_stat("w/sgid");
	close(FD(open("g/in-setgid", O_CREAT | O_WRONLY, 02755)));
	calls_stat("g/in-setgid");
	DO(mkdir("g/dir-in-setgid", 0755));
	calls_stat("g/dir-in-setgid");
	fd = FD(open("w/mine", O_CREAT | O_WRONLY, 0644));
	DO(fchown(fd, -1, U1_EXTRA));
	calls_fstat(fd, "w/mine");
	close(fd);
}

static void calls_open_as_other(void)
{
	DO(open("w/mine", O_WRONLY));
	DO(open("w/mine", O_RDONLY | O_NOATIME));
	close(FD(open("g/nobody-in-setgid", O_CREAT | O_WRONLY, 02755)));
	calls_stat("g/nobody-in-setgid");
}

static void calls_open_excl_and_kinds(void)
{
	calls_write_file("w/f", "0123456789");
	DO(open("w/f", O_CREAT | O_EXCL | O_WRONLY, 0644));
	DO(symlink("dangling-target", "w/dangling"));
	DO(open("w/dangling", O_CREAT | O_EXCL | O_WRONLY, 0644));
	close(FD(open("w/dangling", O_CREAT | O_WRONLY, 0640)));
	calls_stat("w/dangling-target");
	DO(open("w", O_CREAT | O_EXCL | O_WRONLY, 0644));
	DO(open("w", O_CREAT | O_WRONLY, 0644));
	DO(open("w", O_WRONLY));
	DO(open("w", O_RDWR));
	close(FD(open("w", O_RDONLY)));
	DO(open("w/f", O_RDONLY | O_DIRECTORY));
	DO(open("w/dangling", O_RDONLY | O_NOFOLLOW));
	close(FD(open("w/dangling", O_PATH | O_NOFOLLOW)));
	close(FD(open("w/f", O_RDONLY | O_EXCL)));
	DO(open("w/absent", O_RDONLY));
	DO(open("w/f/below", O_RDONLY));
	DO(open("w/f/below", O_CREAT | O_WRONLY, 0644));
	DO(open("w/new-dir/", O_CREAT | O_WRONLY, 0644));
	close(FD(open("w/f", O_RDONLY | O_TRUNC)));
	calls_stat("w/f");
}

static void calls_open_append_and_tmpfile(void)
{
	int a = FD(open("w/log", O_WRONLY | O_CREAT | O_APPEND, 0644));
	int b = FD(open("w/log", O_WRONLY | O_APPEND));

	DO(write(a, "1", 1));
	DO(lseek(b, 0, SEEK_SET));
	DO(write(b, "2", 1));
	DO(pwrite(a, "3", 1, 0));
	DO(lseek(a, 0, SEEK_CUR));
	close(a);
	close(b);
	calls_content("w/log");
	close(FD(open("w", O_TMPFILE | O_RDWR, 0600)));
}

static void calls_open(void)
{
	calls_section("open");
	calls_open_umasks();
	calls_open_excl_and_kinds();
	calls_open_append_and_tmpfile();
	AS_U1(calls_open_as_user);
	AS_U2(calls_open_as_other);
}

/* ---- rename ---- */

static void calls_rename_files(void)
{
	int fd;

	calls_write_file("w/ra", "aaa");
	calls_write_file("w/rb", "bbbbb");
	fd = FD(open("w/rb", O_RDONLY));
	calls_tmark();
	DO(rename("w/ra", "w/rb"));
	calls_stat("w/ra");
	calls_stat("w/rb");
	calls_stat("w");
	calls_fstat(fd, "the replaced file");
	close(fd);
	calls_content("w/rb");
	DO(rename("w/rb", "w/rb"));
	DO(rename("w/absent", "w/rc"));
	DO(rename("w/rb", "w/absent-dir/rc"));
	calls_write_file("w/rc", "c");
	DO(renameat2(AT_FDCWD, "w/rb", AT_FDCWD, "w/rc", RENAME_NOREPLACE));
	DO(renameat2(AT_FDCWD, "w/rb", AT_FDCWD, "w/rc", RENAME_EXCHANGE));
	calls_content("w/rb");
	calls_content("w/rc");
	DO(renameat2(AT_FDCWD, "w/rb", AT_FDCWD, "w/rd", RENAME_EXCHANGE));
}

static void calls_rename_folders(void)
{
	DO(mkdir("w/da", 0755));
	DO(mkdir("w/db", 0755));
	DO(mkdir("w/dc", 0755));
	calls_write_file("w/dc/inside", "in");
	calls_write_file("w/rf", "f");
	DO(rename("w/da", "w/db"));
	calls_list("w/db");
	DO(rename("w/db", "w/dc"));
	DO(rename("w/rf", "w/dc"));
	DO(rename("w/dc", "w/rf"));
	DO(rename("w/dc", "w/dc/sub"));
	DO(mkdir("w/dc/sub", 0755));
	DO(rename("w/dc", "w/dc/sub/deeper"));
	calls_stat("w/dc");
	DO(mkdir("w/dd", 0755));
	calls_tmark();
	DO(rename("w/dc/sub", "w/dd/sub"));
	calls_stat("w/dc");
	calls_stat("w/dd");
	calls_stat("w/dd/sub");
	DO(renameat2(AT_FDCWD, "w/dd", AT_FDCWD, "w/rf", RENAME_EXCHANGE));
	calls_stat("w/dd");
	calls_stat("w/rf");
	calls_list("w/rf");
}

/* A listing read before a rename over one of its names must not bring back the old file. */
static void calls_rename_listed(void)
{
	DIR *d;

	DO(mkdir("w/listed", 0755));
	calls_write_file("w/listed/old", "the old one");
	calls_write_file("w/listed/new", "new");
	calls_stat("w/listed/old");
	d = opendir("w/listed");
	DO(rename("w/listed/new", "w/listed/old"));
	while (d && readdir(d))
		;
	if (d)
		closedir(d);
	calls_stat("w/listed/old");
	calls_content("w/listed/old");
}

static void calls_sticky_owner(void)
{
	calls_write_file("s/u1file", "u1");
	DO(mkdir("s/u1dir", 0755));
	DO(rename("s/u1file", "s/u1moved"));
	DO(rename("s/u1moved", "s/u1file"));
	DO(symlink("u1file", "s/u1link"));
}

static void calls_sticky_other(void)
{
	calls_write_file("s/u2file", "u2");
	DO(rename("s/u1file", "s/stolen"));
	DO(rename("s/u2file", "s/u1file"));
	DO(rename("s/u2file", "s/u1dir"));
	DO(unlink("s/u1file"));
	DO(rmdir("s/u1dir"));
	DO(unlink("s/u1link"));
	close(FD(open("s/u1link", O_RDONLY)));
	DO(open("s/u1file", O_CREAT | O_WRONLY, 0644));
	DO(rename("s/u2file", "s/u2moved"));
	DO(unlink("s/u2moved"));
	DO(rename("r/public", "w/public"));
	DO(rename("w/rb", "r/rb"));
}

static void calls_rename(void)
{
	calls_section("rename");
	calls_rename_files();
	calls_rename_folders();
	calls_rename_listed();
	AS_U1(calls_sticky_owner);
	AS_U2(calls_sticky_other);
	DO(rename("s/u1file", "s/root-took-it"));
	calls_list("s");
}

/* ---- unlink and rmdir ---- */

static void calls_remove_as_other(void)
{
	DO(unlink("r/public"));
	DO(rmdir("r/sub"));
	DO(unlink("s/rm-root"));
	DO(rmdir("s/rm-root-dir"));
}

static void calls_remove(void)
{
	int fd;

	calls_section("remove");
	DO(mkdir("w/rm-full", 0755));
	calls_write_file("w/rm-full/x", "x");
	DO(mkdir("w/rm-empty", 0755));
	calls_write_file("w/rm-file", "gone");
	DO(rmdir("w/rm-full"));
	DO(rmdir("w/rm-file"));
	DO(rmdir("w/rm-empty/."));
	DO(rmdir("w/rm-empty/.."));
	DO(unlink("w/rm-empty"));
	DO(unlink("w/absent"));
	DO(rmdir("w/absent"));
	DO(mkdir("r/sub", 0755));
	calls_write_file("s/rm-root", "root's");
	DO(mkdir("s/rm-root-dir", 0777));
	AS_U2(calls_remove_as_other);
	fd = FD(open("w/rm-file", O_RDWR));
	DO(unlink("w/rm-file"));
	calls_fstat(fd, "the unlinked open file");
	DO(pwrite(fd, "still", 5, 0));
	calls_fstat(fd, "the unlinked open file");
	close(fd);
	DO(unlink("w/rm-full/x"));
	DO(rmdir("w/rm-full"));
	calls_tmark();
	DO(rmdir("w/rm-empty"));
	calls_stat("w");
	calls_list("w");
}

/* ---- hard links and the attributes of every name ---- */

static void calls_link_changes(void)
{
	struct timespec ts[2] = { { 1000000000, 111 }, { 1100000000, 222 } };
	int fd;

	DO(chmod("h/b", 0600));
	calls_stat("h/a");
	DO(chown("h/a", U1, U1));
	calls_stat("h/b");
	calls_tmark();
	fd = FD(open("h/b", O_WRONLY | O_APPEND));
	DO(write(fd, "6789", 4));
	close(fd);
	calls_stat("h/a");
	calls_tmark();
	DO(truncate("h/a", 2));
	calls_stat("h/b");
	DO(utimensat(AT_FDCWD, "h/b", ts, 0));
	calls_times("h/a");
	fd = FD(open("h/a", O_RDWR));
	DO(pwrite(fd, "through one descriptor", 22, 0));
	calls_stat("h/b");
	DO(ftruncate(fd, 3));
	calls_stat("h/b");
	close(fd);
}

static void calls_link_counts(void)
{
	DO(link("h/a", "h/c"));
	calls_stat("h/b");
	calls_tmark();
	DO(unlink("h/a"));
	calls_stat("h/b");
	calls_stat("h/c");
	calls_write_file("h/x", "x");
	DO(rename("h/x", "h/c"));
	calls_stat("h/b");
	calls_stat("h/c");
	DO(link("h/b", "h/d"));
	DO(rename("h/b", "h/d"));
	calls_stat("h/b");
	calls_stat("h/d");
	calls_list("h");
}

static void calls_link_as_other(void)
{
	DO(link("r/private", "w/stolen-link"));
	DO(link("r/public", "w/public-link"));
	DO(link("w", "w/dir-link"));
}

static void calls_link(void)
{
	calls_section("link");
	DO(mkdir("h", 0755));
	calls_write_file("h/a", "12345");
	calls_stat("h/a");
	calls_tmark();
	DO(link("h/a", "h/b"));
	calls_stat("h/a");
	calls_stat("h/b");
	DO(link("h/a", "h/b"));
	DO(link("h/absent", "h/e"));
	DO(link("h", "h/dir-link"));
	calls_link_changes();
	calls_link_counts();
	AS_U2(calls_link_as_other);
	calls_stat("r/public");
}

/* ---- symlinks ---- */

static void calls_symlink_as_user(void)
{
	DO(symlink("f", "w/u1link"));
	calls_stat("w/u1link");
	DO(lchown("w/u1link", U1, U1_EXTRA));
	DO(lchown("w/u1link", U2, -1));
	calls_stat("w/u1link");
}

static void calls_symlink(void)
{
	char target[4096];
	char buf[4200];
	char ok_target[1001];

	calls_section("symlink");
	DO(symlink("f", "w/sl"));
	calls_stat("w/sl");
	DO(readlink("w/sl", buf, sizeof(buf)));
	DO(symlink("other", "w/sl"));
	DO(symlink("", "w/empty-target"));
	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	DO(symlink(target, "w/long-target"));
	memset(ok_target, 'y', sizeof(ok_target) - 1);
	ok_target[sizeof(ok_target) - 1] = '\0';
	DO(symlink(ok_target, "w/long-target"));
	DO(readlink("w/long-target", buf, sizeof(buf)));
	calls_stat("w/long-target");
	DO(lchown("w/sl", U2, U2));
	calls_stat("w/sl");
	calls_stat("w/f");
	DO(fchmodat(AT_FDCWD, "w/sl", 0600, AT_SYMLINK_NOFOLLOW));
	calls_content("w/sl");
	DO(readlink("w/f", buf, sizeof(buf)));
	AS_U1(calls_symlink_as_user);
}

/* ---- truncate ---- */

static void calls_truncate_as_user(void)
{
	DO(truncate("r/public", 1));
	calls_write_file("w/tr-mine", "mine");
	DO(chmod("w/tr-mine", 04755));
	DO(truncate("w/tr-mine", 1));
	calls_stat("w/tr-mine");
	DO(truncate("w/tr-theirs", 1));
	calls_stat("w/tr-theirs");
}

static void calls_truncate(void)
{
	int fd;

	calls_section("truncate");
	calls_write_file("w/t", "0123456789");
	calls_tmark();
	DO(truncate("w/t", 4));
	calls_stat("w/t");
	calls_content("w/t");
	DO(truncate("w/t", 8));
	calls_stat("w/t");
	calls_tmark();
	DO(truncate("w/t", 8));
	calls_stat("w/t");
	DO(truncate("w/t", -1));
	DO(truncate("w", 0));
	DO(truncate("w/absent", 0));
	fd = FD(open("w/t", O_RDONLY));
	DO(ftruncate(fd, 0));
	close(fd);
	calls_write_file("w/tr-theirs", "theirs");
	DO(chmod("w/tr-theirs", 04766));
	AS_U1(calls_truncate_as_user);
}

/* ---- utimensat ---- */

static void calls_utimens_as_other(void)
{
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct timespec set[2] = { { 1300000000, 0 }, { 1300000000, 0 } };

	DO(utimensat(AT_FDCWD, "w/ut-open", now, 0));
	DO(utimensat(AT_FDCWD, "w/ut-open", set, 0));
	DO(utimensat(AT_FDCWD, "w/ut-closed", now, 0));
	DO(utimensat(AT_FDCWD, "w/ut-closed", NULL, 0));
	DO(utimensat(AT_FDCWD, "w/ut-closed", set, 0));
}

static void calls_utimens(void)
{
	struct timespec set[2] = { { 1000000000, 123456789 }, { 1200000000, 987654321 } };
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct timespec omit[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
	struct timespec mixed[2] = { { 1000000005, 5 }, { 0, UTIME_OMIT } };
	struct timespec bad[2] = { { 0, 1000000000 }, { 0, 0 } };

	calls_section("utimens");
	calls_write_file("w/ut", "u");
	DO(utimensat(AT_FDCWD, "w/ut", set, 0));
	calls_times("w/ut");
	calls_tmark();
	DO(utimensat(AT_FDCWD, "w/ut", omit, 0));
	calls_stat("w/ut");
	calls_times("w/ut");
	DO(utimensat(AT_FDCWD, "w/ut", mixed, 0));
	calls_times("w/ut");
	calls_stat("w/ut");
	calls_tmark();
	DO(utimensat(AT_FDCWD, "w/ut", now, 0));
	calls_stat("w/ut");
	DO(utimensat(AT_FDCWD, "w/ut", bad, 0));
	DO(utimensat(AT_FDCWD, "w/absent", now, 0));
	DO(symlink("ut", "w/ut-link"));
	DO(utimensat(AT_FDCWD, "w/ut-link", set, AT_SYMLINK_NOFOLLOW));
	calls_times("w/ut-link");
	calls_stat("w/ut");
	calls_write_file("w/ut-open", "o");
	DO(chmod("w/ut-open", 0666));
	calls_write_file("w/ut-closed", "c");
	calls_tmark();
	AS_U1(calls_utimens_as_other);
	calls_stat("w/ut-open");
}

/* ---- chmod and chown, as the owner, another user and root ---- */

static void calls_perm_as_owner(void)
{
	DO(chmod("w/own-root-group", 02755));	/* not in the group: setgid is dropped */
	calls_stat("w/own-root-group");
	calls_write_file("w/own", "own");
	DO(chmod("w/own", 0700));
	DO(chmod("w/own", 02755));
	calls_stat("w/own");
	DO(chown("w/own", -1, U1_EXTRA));
	DO(chmod("w/own", 02755));
	calls_stat("w/own");
	DO(chmod("w/own", 01644));
	calls_stat("w/own");
	DO(chown("w/own", U2, -1));
	DO(chown("w/own", U1, -1));
	DO(chown("w/own", -1, 0));
	DO(chown("w/own", -1, -1));
	DO(chmod("w/own", 06755));
	DO(chown("w/own", -1, U1));
	calls_stat("w/own");
	DO(chmod("r/public", 0666));
	DO(access("r/private", R_OK));
	DO(access("r/public", W_OK));
	DO(access("r/public", R_OK));
}

static void calls_perm_as_other(void)
{
	int fd;

	DO(chmod("w/own", 0777));
	DO(chown("w/own", U2, -1));
	calls_tmark();
	DO(chown("w/own", -1, -1));
	calls_stat("w/own");
	DO(utimensat(AT_FDCWD, "w/own", NULL, 0));
	fd = FD(open("w/setid-all", O_WRONLY));
	DO(write(fd, "w", 1));
	close(fd);
	calls_stat("w/setid-all");
}

static void calls_perm(void)
{
	calls_section("perm");
	calls_write_file("w/setid-all", "anyone writes");
	DO(chmod("w/setid-all", 06777));
	calls_tmark();
	DO(chmod("w/setid-all", 06777));
	calls_stat("w/setid-all");
	calls_write_file("w/own-root-group", "u1's, group 0");
	DO(chown("w/own-root-group", U1, 0));
	AS_U1(calls_perm_as_owner);
	AS_U2(calls_perm_as_other);
	DO(chmod("w/own", 04755));
	DO(chown("w/own", U2, U2));
	calls_stat("w/own");
	DO(chmod("w/own", 04755));
	DO(chown("w/own", -1, U1_EXTRA));
	calls_stat("w/own");
	DO(access("w/own", X_OK));
	DO(chmod("w/own", 0644));
	DO(access("w/own", X_OK));
	DO(access("r/private", R_OK | W_OK));
}

/* ---- special files: FIFOs, sockets, devices ---- */

static void calls_fifo_use(void)
{
	char buf[32] = { 0 };
	int fd, status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int w = open("w/fifo", O_WRONLY);

		_exit(w >= 0 && write(w, "through the fifo", 16) == 16 ? 0 : 1);
	}
	fd = FD(open("w/fifo", O_RDONLY));
	if (fd < 0)
		kill(pid, SIGKILL);
	DO(read(fd, buf, sizeof(buf) - 1));
	waitpid(pid, &status, 0);
	calls_head();
	printf("fifo read \"%s\", writer exit %d\n", buf, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(fd);
}

static struct sockaddr_un calls_sun(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	return sun;
}

static void calls_socket_connect(void)
{
	struct sockaddr_un sun = calls_sun("w/sock");
	int c = socket(AF_UNIX, SOCK_STREAM, 0);

	DO(connect(c, (struct sockaddr *)&sun, sizeof(sun)));
	close(c);
}

static void calls_socket_use(void)
{
	struct sockaddr_un sun = calls_sun("w/sock");
	char buf[8] = { 0 };
	int s = FD(socket(AF_UNIX, SOCK_STREAM, 0));
	int c = FD(socket(AF_UNIX, SOCK_STREAM, 0));
	int a;

	umask(027);
	DO(bind(s, (struct sockaddr *)&sun, sizeof(sun)));
	umask(022);
	DO(listen(s, 4));
	calls_stat("w/sock");
	DO(connect(c, (struct sockaddr *)&sun, sizeof(sun)));
	a = FD(accept(s, NULL, NULL));
	DO(send(c, "ping", 4, 0));
	DO(recv(a, buf, sizeof(buf), 0));
	AS_U2(calls_socket_connect);
	close(a);
	close(c);
	DO(bind(c = socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&sun, sizeof(sun)));
	close(c);
	close(s);
	DO(unlink("w/sock"));
}

static void calls_socket_bind(void)
{
	struct sockaddr_un sun = calls_sun("w/u1sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	DO(bind(s, (struct sockaddr *)&sun, sizeof(sun)));
	close(s);
	calls_stat("w/u1sock");
}

static void calls_special_as_user(void)
{
	DO(mknod("w/u1dev", S_IFCHR | 0600, makedev(1, 3)));
	umask(077);
	DO(mkfifo("w/u1fifo", 0666));
	umask(022);
	calls_stat("w/u1fifo");
	DO(mknod("g/u1fifo", S_IFIFO | 0640, 0));
	calls_stat("g/u1fifo");
	calls_socket_bind();
}

static void calls_devices(void)
{
	int fd;

	DO(mknod("w/null", S_IFCHR | 0666, makedev(1, 3)));
	calls_stat("w/null");
	fd = FD(open("w/null", O_WRONLY));
	DO(write(fd, "x", 1));
	close(fd);
	DO(mknod("w/blk", S_IFBLK | 0600, makedev(7, 200)));
	calls_stat("w/blk");
	DO(mknod("w/null", S_IFCHR | 0666, makedev(1, 3)));
	DO(rename("w/null", "w/null2"));
	calls_stat("w/null2");
	DO(unlink("w/null2"));
	DO(unlink("w/blk"));
}

static void calls_special(void)
{
	calls_section("special");
	umask(002);
	DO(mkfifo("w/fifo", 0666));
	umask(022);
	calls_stat("w/fifo");
	DO(mkfifo("w/fifo", 0666));
	calls_fifo_use();
	DO(mknod("w/reg", S_IFREG | 0640, 0));
	calls_stat("w/reg");
	DO(mknod("w/dir", S_IFDIR | 0755, 0));
	DO(mknod("w/fifo2", S_IFIFO | 04755, 0));
	calls_stat("w/fifo2");
	DO(mknod("w/absent/fifo", S_IFIFO | 0644, 0));
	calls_socket_use();
	calls_devices();
	AS_U1(calls_special_as_user);
	DO(rename("w/fifo", "w/reg"));
	calls_stat("w/reg");
	calls_list("w");
}

/* ---- calls mlfs does not implement: docs/posix.md names each ---- */

static void calls_unimplemented(void)
{
	char buf[16];
	int fd;

	calls_section("more");
	calls_write_file("w/x", "x");
	DO(setxattr("w/x", "user.k", "v", 1, 0));
	DO(getxattr("w/x", "user.k", buf, sizeof(buf)));
	fd = FD(open("w/x", O_RDWR));
	DO(fallocate(fd, 0, 0, 8192));
	calls_fstat(fd, "w/x");
	DO(ftruncate(fd, 1 << 20));
	DO(pwrite(fd, "end", 3, (1 << 20) - 3));
	DO(lseek(fd, 0, SEEK_HOLE));
	DO(lseek(fd, 16384, SEEK_DATA));
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 2 || chdir(argv[1]) < 0 || geteuid() != 0) {
		fprintf(stderr, "usage: posix_calls FOLDER (as root, FOLDER empty)\n");
		return 1;
	}
	calls_n = mmap(NULL, sizeof(*calls_n), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (calls_n == MAP_FAILED)
		return 1;
	alarm(120);	/* a FIFO or socket that never answers fails the run, not hangs it */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	calls_folders();
	calls_open();
	calls_rename();
	calls_remove();
	calls_link();
	calls_symlink();
	calls_truncate();
	calls_utimens();
	calls_perm();
	calls_special();
	calls_unimplemented();
	fflush(stdout);
	return 0;
}
