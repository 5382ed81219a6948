/* output.c: files written where the user points (output.h,
 * Note [Writing where the user points]). */
#include "kernels/base/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/input.h"

static ab_status refuse(ab_diag_t *diag, const char *what, const char *path, const char *why) {
  if (what) return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': %s", what, path, why);
  return ab_diag_set(diag, AB_ERR_INVALID, "%s: %s", path, why);
}

static bool names_a_descriptor(const char *p);

/* The folder path is written in ("." for a bare name, "/" for "/name"), into dir. */
static bool folder_of(const char *path, char *dir, size_t size) {
  if (snprintf(dir, size, "%s", path) >= (int)size) return false;
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    snprintf(dir, size, ".");
  else
    slash[slash == dir] = '\0';
  return true;
}

ab_status ab_output_check(const char *what, const char *path, ab_diag_t *diag) {
  if (path == NULL || path[0] == '\0') return refuse(diag, what, "", "an empty path (expected a file name)");
  if (strlen(path) >= AB_OUTPUT_PATH_BYTES) return refuse(diag, what, path, "path too long");
  struct stat sb, lsb;
  bool exists = stat(path, &sb) == 0;
  if (!exists && lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode))
    return refuse(diag, what, path, "a link to nothing; refusing to replace it");
  if (exists && S_ISDIR(sb.st_mode)) return refuse(diag, what, path, "is a directory (expected a file)");
  if (ab_input_is_input(path))
    return refuse(diag, what, path, "is an input of this run; refusing to write over it");
  return AB_OK;
}

ab_status ab_output_check_folder(const char *what, const char *path, ab_diag_t *diag) {
  struct stat sb;
  bool exists = stat(path, &sb) == 0;
  if ((exists && !S_ISREG(sb.st_mode)) || strncmp(path, "/dev/", 5) == 0 || strncmp(path, "/proc/", 6) == 0 ||
      names_a_descriptor(path))
    return AB_OK; /* written straight (item 4) */
  char *resolved = exists ? realpath(path, NULL) : NULL;
  if (exists && resolved == NULL) return AB_OK; /* said when it is opened */
  char dir[AB_OUTPUT_PATH_BYTES];
  bool fits = folder_of(resolved ? resolved : path, dir, sizeof dir);
  free(resolved);
  if (!fits) return refuse(diag, what, path, "path too long");
  ab_diag_t why = {""};
  if (ab_output_check_dir("its folder", dir, &why) != AB_OK)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': %s", what, path, why.msg);
  return AB_OK;
}

/* Creates path and its parents; *first_made is the length of the first prefix this call
 * created (0: none). */
static ab_status make_dirs(char *path, size_t *first_made, int *err, ab_diag_t *diag) {
  *first_made = 0;
  *err = 0;
  if (*path == '\0') return ab_diag_set(diag, AB_ERR_INVALID, "an empty path (expected a directory)");
  for (char *p = path + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char was = *p;
      *p = '\0';
      struct stat sb;
      if (mkdir(path, 0755) == 0) {
        if (*first_made == 0) *first_made = (size_t)(p - path);
      } else if (errno != EEXIST) {
        *err = errno;
        return ab_diag_set(diag, AB_ERR_IO, "%s: cannot create directory: %s", path, strerror(*err));
      } else if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        return ab_diag_set(diag, AB_ERR_INVALID, "%s is not a directory", path);
      }
      *p = was;
      if (was == '\0') break;
    }
  }
  return AB_OK;
}

ab_status ab_output_mkdirs_made(const char *dir, size_t *made, ab_diag_t *diag) {
  char path[AB_OUTPUT_PATH_BYTES];
  int err;
  *made = 0;
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return refuse(diag, NULL, dir, "path too long");
  return make_dirs(path, made, &err, diag);
}

ab_status ab_output_mkdirs(const char *dir, ab_diag_t *diag) {
  size_t made;
  return ab_output_mkdirs_made(dir, &made, diag);
}

static void remove_made(char *path, size_t first_made);

void ab_output_unmake(const char *dir, size_t made) {
  char path[AB_OUTPUT_PATH_BYTES];
  if (made == 0 || snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return;
  remove_made(path, made);
}

/* Removes the folders of path from the deepest up to the prefix of length first_made. */
static void remove_made(char *path, size_t first_made) {
  size_t len = strlen(path);
  while (len >= first_made && len > 0) {
    path[len] = '\0';
    rmdir(path);
    while (len > 0 && path[len - 1] != '/') len--;
    while (len > 0 && path[len - 1] == '/') len--;
  }
}

ab_status ab_output_check_dir(const char *what, const char *dir, ab_diag_t *diag) {
  char path[AB_OUTPUT_PATH_BYTES], probe[AB_OUTPUT_PATH_BYTES + 48];
  size_t first_made = 0;
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return refuse(diag, what, dir, "path too long");
  ab_diag_t why = {""};
  ab_status st;
  /* Several processes of one launch (mpirun's ranks on a host) check the same folder at once:
   * one may remove what it made (below) while another makes or probes it. A folder gone under a
   * check is made again. */
  for (int attempt = 0;; attempt++) {
    int err = 0;
    st = make_dirs(path, &first_made, &err, &why);
    if (st == AB_OK) {
      snprintf(probe, sizeof probe, "%s/.allocbench-probe.%ld", path, (long)getpid());
      int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) {
        err = errno;
        st = ab_diag_set(&why, AB_ERR_IO, "cannot write there: %s", strerror(err));
      } else {
        close(fd);
        unlink(probe);
      }
    }
    if (st == AB_OK || err != ENOENT || attempt == 8) break;
  }
  /* The first results file makes the folders again. */
  if (first_made) remove_made(path, first_made);
  if (st != AB_OK) return ab_diag_set(diag, st, "%s '%s': %s", what, dir, why.msg);
  return AB_OK;
}

/* The process's own descriptors, reached by name: /dev/stdout, /dev/fd/1, /proc/self/fd/1. */
static bool names_a_descriptor(const char *p) {
  return strncmp(p, "/dev/std", 8) == 0 || strncmp(p, "/dev/fd/", 8) == 0 ||
         (strncmp(p, "/proc/", 6) == 0 && strstr(p, "/fd/") != NULL);
}

bool ab_output_is_special(const char *path) {
  if (names_a_descriptor(path)) return true;
  char link[PATH_MAX];
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n > 0) {
    link[n] = '\0';
    if (names_a_descriptor(link)) return true;
  }
  struct stat sb;
  return stat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
}

/* NAME.tmp.PID: true with *pid when entry is one of base's temporary files. */
static bool temp_of(const char *entry, const char *base, long *pid) {
  size_t blen = strlen(base);
  if (strncmp(entry, base, blen) != 0 || strncmp(entry + blen, ".tmp.", 5) != 0) return false;
  const char *digits = entry + blen + 5;
  if (*digits == '\0' || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 9) return false;
  *pid = strtol(digits, NULL, 10);
  return *pid > 0;
}

void ab_output_clean_stale(const char *path) {
  char dir[AB_OUTPUT_PATH_BYTES];
  if (!folder_of(path, dir, sizeof dir)) return;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  DIR *d = opendir(dir);
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    long pid;
    if (!temp_of(e->d_name, base, &pid) || pid == (long)getpid()) continue;
    /* ESRCH: no such process. EPERM means it runs as another user: leave it. */
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char stale[AB_OUTPUT_PATH_BYTES + 300];
    snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(stale, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(stale);
  }
  closedir(d);
}

static const volatile sig_atomic_t *stop_flag = NULL;

void ab_output_stop_on(const volatile sig_atomic_t *stop) { stop_flag = stop; }

static bool stopping(void) { return stop_flag && *stop_flag; }

static void pause_briefly(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

/* Item 8 of the Note: a FIFO is written without blocking, waiting in short polls that look
 * at the stop flag between them. */
static ssize_t fifo_write(void *cookie, const char *buf, size_t n) {
  int fd = *(int *)cookie;
  size_t done = 0;
  while (done < n) {
    ssize_t k = write(fd, buf + done, n - done);
    if (k > 0) {
      done += (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR) return done ? (ssize_t)done : -1;
    if (stopping()) {
      errno = EINTR;
      return done ? (ssize_t)done : -1;
    }
    struct pollfd pf = {fd, POLLOUT, 0};
    poll(&pf, 1, 100);
  }
  return (ssize_t)done;
}

static int fifo_close(void *cookie) {
  int fd = *(int *)cookie;
  free(cookie);
  return close(fd);
}

/* Opens a FIFO for writing once a reader has it open, or fails when asked to stop. */
static int open_fifo(const char *path) {
  for (;;) {
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 || errno != ENXIO) return fd; /* ENXIO: no reader yet */
    if (stopping()) {
      errno = EINTR;
      return -1;
    }
    pause_briefly();
  }
}

static FILE *fifo_stream(int fd) {
  int *cookie = malloc(sizeof *cookie);
  if (cookie == NULL) return NULL;
  *cookie = fd;
  cookie_io_functions_t io = {NULL, fifo_write, NULL, fifo_close};
  FILE *f = fopencookie(cookie, "w", io);
  if (f == NULL) free(cookie);
  return f;
}

static ab_status open_straight(ab_output_t *o, ab_diag_t *diag) {
  struct stat sb;
  bool fifo = stat(o->path, &sb) == 0 && S_ISFIFO(sb.st_mode);
  /* Appended: /dev/stdout may be a file the shell opened, already holding our output. */
  int fd = fifo ? open_fifo(o->path) : open(o->path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && errno == EINTR && stopping())
    return ab_diag_set(diag, AB_ERR_IO, "%s: stopped while waiting for a reader of the FIFO", o->path);
  if (fd < 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", o->path, strerror(errno));
  o->f = fifo ? fifo_stream(fd) : fdopen(fd, "a");
  if (o->f == NULL) {
    close(fd);
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", o->path, strerror(errno));
  }
  snprintf(o->target, sizeof o->target, "%s", o->path);
  o->tmp[0] = '\0';
  return AB_OK;
}

/* The temporary file, created afresh: O_EXCL and O_NOFOLLOW, so that a link planted under
 * its name is never followed. */
static int create_temp(const char *tmp) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
    unlink(tmp); /* ours by its PID: left by an earlier process of the same number */
  }
  return -1;
}

static ab_status open_temp(ab_output_t *o, ab_diag_t *diag) {
  struct stat sb;
  bool exists = stat(o->path, &sb) == 0;
  if (exists && realpath(o->path, o->target) == NULL)
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot resolve: %s", o->path, strerror(errno));
  if (!exists) snprintf(o->target, sizeof o->target, "%s", o->path);
  /* Its folder, made as --out's is (item 9). */
  char dir[AB_OUTPUT_PATH_BYTES];
  size_t first_made;
  int err;
  if (!exists && folder_of(o->target, dir, sizeof dir) && access(dir, F_OK) != 0)
    AB_TRY(make_dirs(dir, &first_made, &err, diag));
  ab_output_clean_stale(o->target);
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->target, (long)getpid());
  int fd = create_temp(o->tmp);
  /* The name the user gave, not the temporary one they never asked for. */
  if (fd < 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot create: %s", o->path, strerror(errno));
  if (exists) {
    /* The replacement keeps what the user gave the file; failing to is no reason to stop. */
    if (fchmod(fd, sb.st_mode & 07777) != 0) { /* kept as created */ }
    if (geteuid() == 0 && fchown(fd, sb.st_uid, sb.st_gid) != 0) { /* kept as root's */ }
  }
  o->f = fdopen(fd, "w");
  if (o->f == NULL) {
    int saved = errno;
    close(fd);
    unlink(o->tmp);
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", o->path, strerror(saved));
  }
  return AB_OK;
}

ab_status ab_output_open(ab_output_t *o, const char *path, ab_diag_t *diag) {
  memset(o, 0, sizeof *o);
  AB_TRY(ab_output_check(NULL, path, diag));
  snprintf(o->path, sizeof o->path, "%s", path);
  return ab_output_is_special(path) ? open_straight(o, diag) : open_temp(o, diag);
}

void ab_output_abort(ab_output_t *o) {
  if (o->f) fclose(o->f);
  o->f = NULL;
  if (o->tmp[0]) unlink(o->tmp);
}

ab_status ab_output_commit(ab_output_t *o, ab_diag_t *diag) {
  int err = 0;
  if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
  if (!err && o->tmp[0] && fsync(fileno(o->f)) != 0) err = errno;
  if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
  o->f = NULL;
  if (!err && o->tmp[0] && rename(o->tmp, o->target) != 0) err = errno;
  if (err && o->tmp[0]) unlink(o->tmp);
  if (err) return ab_diag_set(diag, AB_ERR_IO, "%s: write failed: %s", o->path, strerror(err));
  return AB_OK;
}
