/*
 * hintbox-gate: the first program of every hintbox sandbox.
 *
 *   HINTBOX_GATE_SOCKET=/run/hintbox/io/NAME.sock HINTBOX_GATE_TOKEN=HEX \
 *   GLIBC_TUNABLES= HINTBOX_GATE_TUNABLES=[=VALUE] hintbox-gate PROGRAM [ARG...]
 *
 * It connects twice to the Unix socket hintbox listens on (bound into the container
 * read-only): the server's connection (the token and a newline) and its own control
 * connection (the token, '+' and a newline); hintbox takes no other connection as the gate's.
 * It waits for hintbox to release it (one byte, 'G', on the server's connection), starts the
 * server with that connection as its stdin and stdout, and stays, as the sandbox's first
 * process (PID 1 of its PID namespace), to freeze and thaw it on hintbox's command:
 *
 *   'S' stop: every other process of the namespace is stopped (SIGSTOP, which cannot be caught
 *       or ignored), until two passes over /proc in a row see every task stopped, the same
 *       tasks, none of them scheduled in between (its context-switch counts unchanged): so at
 *       one instant between the passes all were stopped, and a stopped task cannot wake
 *       another. Answers 'S', or 'F' when that could not be reached in FREEZE_LIMIT_MS.
 *       While frozen it keeps watching (every WATCH_MS each task of the freeze's last pass read again):
 *       should anything have run all the same (a SIGCONT the kernel sent: a timer's, F_SETSIG),
 *       it kills every process, sends 'B' unasked and exits (GATE_WOKEN).
 *   'C' continue: SIGCONT to every other process. Answers 'C'.
 *
 * Commands are obeyed one at a time, in the order they came. hintbox writes a call to the server
 * right behind its 'C', without waiting for the answer: a stopped server reads nothing, so the
 * call is read only once the gate has continued it.
 *
 * Why PID 1: the kernel drops signals that other processes of the namespace send to its init
 * unless init handles them, and SIGSTOP and SIGKILL are never handled, so the server cannot
 * stop or kill its own gate; kill(-1, ...) from PID 1 reaches every other process of the
 * namespace, whatever its session or process group. It also reaps orphans, forwards the
 * signals an engine sends (TERM, INT, HUP, QUIT, USR1, USR2) to the server, and exits with the
 * server's status (128 + the signal when it was killed). When hintbox closes the control
 * connection (it is gone), the gate kills every process of the sandbox and exits.
 *
 * Until the release nothing of the image runs; if hintbox closes the connection instead, the
 * gate exits and the server never starts.
 *
 * Why a static binary of hintbox's own, bound in from the host: the image is untrusted. Its
 * /bin/sh, its dynamic loader and its libc are the image's to replace, so a gate built on any
 * of them could be skipped. This file is linked statically (no PT_INTERP; hintbox checks) and
 * uses nothing from the container's file system before exec.
 *
 * Why a socket rather than the container's stdio: MCP messages then go straight between the
 * server and hintbox, instead of through containerd's shim, FIFOs and dockerd's attach stream.
 *
 * Stdio mode (HINTBOX_GATE_SOCKET=-, Kubernetes: the API's attach is the only channel): after
 * the release the gate stays PID 1 as above and relays, so that the attach carries both the
 * server's stdio and the freeze. The server's stdin and stdout are pipes to the gate; the
 * attach's stdin and stdout are the gate's alone (the server cannot reach them: the gate is
 * not dumpable, so /proc/1/fd is closed to it). Frames, in both directions:
 *
 *   'D' LEN(4 bytes, big-endian) BYTES   data: to the server's stdin / from its stdout
 *   'S', 'C'                             hintbox's commands (in) / the gate's answers (out),
 *   'F', 'B'                             as on the control connection (out only)
 *
 * Every byte the server writes reaches hintbox inside a 'D' frame the gate made, so no output
 * of the server can be taken for an answer, and nothing it writes reaches the gate's input.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

enum { GATE_FAILED = 111, GATE_WOKEN = 112, EXEC_FAILED = 127 };
/* How long a stop may take before the gate answers 'F' (hintbox then pauses and removes the sandbox). */
enum { FREEZE_LIMIT_MS = 2000 };
/* The most of hintbox's data the gate holds for a server that does not read (stdio mode). */
enum { PENDING_MAX = 1 << 20, CHUNK = 65536 };
/*
 * While frozen, how often the gate looks again that nothing of the sandbox has run (ms): a
 * SIGCONT the kernel sends (a POSIX timer's, F_SETSIG on a descriptor, mq_notify) continues a
 * stopped task without any process of the sandbox running, so the stop alone cannot hold.
 */
enum { WATCH_MS = 10 };
/* The most tasks one pass records: the highest pids limit a profile may set. */
enum { MAX_TASKS = 65536 };

static void say(const char *what, const char *detail) {
  const char *parts[] = {"hintbox-gate: ", what, detail ? ": " : "", detail ? detail : "", "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    ssize_t ignored = write(2, parts[i], strlen(parts[i]));
    (void)ignored;
  }
}

/* Writes all of buf, across short writes and interruptions. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/*
 * GLIBC_TUNABLES is set empty for the gate itself (its static libc reads it at start-up: the
 * image's ENV may not tune it). The server gets the profile's own value, which hintbox passes
 * as HINTBOX_GATE_TUNABLES="=VALUE", or no GLIBC_TUNABLES at all when that is empty.
 */
static int restore_tunables(void) {
  const char *saved = getenv("HINTBOX_GATE_TUNABLES");
  int rc = saved != NULL && saved[0] == '=' ? setenv("GLIBC_TUNABLES", saved + 1, 1) : unsetenv("GLIBC_TUNABLES");
  return rc != 0 ? rc : unsetenv("HINTBOX_GATE_TUNABLES");
}

/* Connects to hintbox's socket and proves itself with `token` and `suffix`. -1 on failure (said). */
static int connect_gate(const char *path, const char *token, const char *suffix, int flags) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    say("socket path too long", path);
    return -1;
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | flags, 0);
  int rc;
  do rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&addr, sizeof addr);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    say("cannot connect to hintbox", strerror(errno));
    return -1;
  }
  if (write_all(fd, token, strlen(token)) != 0 || write_all(fd, suffix, strlen(suffix)) != 0) {
    say("cannot send the token to hintbox", strerror(errno));
    return -1;
  }
  return fd;
}

/* Reads a small file whole (NUL-terminated). Its length, or -1 (a task that is gone: ENOENT, ESRCH). */
static ssize_t read_small(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    if (len == size - 1) break;
  }
  close(fd);
  buf[len] = 0;
  return (ssize_t)len;
}

struct task {
  long tid;
  unsigned long long switches;
};
static struct task passes[2][MAX_TASKS];
/* After a freeze that held: passes[1] holds its last pass, `watched` tasks long. */
static int watched;

/* The number after `key` in a /proc status text, or 0. */
static unsigned long long field(const char *text, const char *key) {
  const char *at = strstr(text, key);
  return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

/*
 * One pass over every task of the namespace but the gate's own: 1 when each is stopped (or
 * dead), with their ids and context-switch counts in `out`; 0 when one is not; -1 on error.
 * One file per task: its status holds the state and both counts, read together (its name is
 * escaped there, so no line of it can be forged by a task's name).
 */
static int scan(struct task *out, int *count) {
  const long self = (long)getpid();
  DIR *proc = opendir("/proc");
  if (proc == NULL) return -1;
  int n = 0, all = 1;
  char path[96], text[16384];
  struct dirent *p;
  while (all == 1 && (p = readdir(proc)) != NULL) {
    long pid = strtol(p->d_name, NULL, 10);
    if (pid <= 1 || pid == self) continue; /* not a process, the gate, or the engine's init */
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *tasks = opendir(path);
    if (tasks == NULL) continue; /* gone since the listing */
    struct dirent *t;
    while (all == 1 && (t = readdir(tasks)) != NULL) {
      long tid = strtol(t->d_name, NULL, 10);
      if (tid <= 0) continue;
      snprintf(path, sizeof path, "/proc/%ld/task/%ld/status", pid, tid);
      if (read_small(path, text, sizeof text) < 0) continue; /* gone */
      /* Without its state or both counts (a cut or odd status) the check would be blind: give up (fail closed). */
      const char *state = strstr(text, "\nState:\t");
      if (state == NULL || strstr(text, "\nvoluntary_ctxt_switches:") == NULL ||
          strstr(text, "\nnonvoluntary_ctxt_switches:") == NULL) {
        all = -1;
        break;
      }
      char letter = state[strlen("\nState:\t")];
      if (letter == 0 || strchr("TtZX", letter) == NULL) {
        all = 0;
        break;
      }
      /* A dead task runs nothing, and the gate may reap it while frozen: not recorded. */
      if (letter == 'Z' || letter == 'X') continue;
      if (n == MAX_TASKS) {
        all = -1;
        break;
      }
      out[n].tid = tid;
      out[n].switches = field(text, "\nvoluntary_ctxt_switches:") + field(text, "\nnonvoluntary_ctxt_switches:");
      n++;
    }
    closedir(tasks);
  }
  closedir(proc);
  *count = n;
  return all;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Stops every other process of the namespace and makes sure of it (see the top). 0, or -1. */
static int stop_all(void) {
  /*
   * kill(-1, ...) from anything but its namespace's first process would reach processes outside
   * the sandbox (on a host without a PID namespace: every process the user may signal).
   */
  if (getpid() != 1) return -1;
  long long deadline = now_ms() + FREEZE_LIMIT_MS;
  for (int round = 0; now_ms() < deadline; round++) {
    if (kill(-1, SIGSTOP) != 0 && errno != ESRCH) return -1;
    int first, second;
    int a = scan(passes[0], &first);
    if (a < 0) return -1;
    if (a == 1) {
      int b = scan(passes[1], &second);
      if (b < 0) return -1;
      if (b == 1 && first == second && memcmp(passes[0], passes[1], sizeof(struct task) * (size_t)first) == 0) {
        watched = second;
        return 0;
      }
    }
    /* A task that has not stopped yet is on its way (or in an uninterruptible wait): let it. */
    if (round > 2) {
      struct timespec pause = {0, 200000};
      nanosleep(&pause, NULL);
    }
  }
  return -1;
}


/*
 * The egress relay. A sandbox with hosts by name has no network at all; its way out is the
 * egress proxy, reached over a Unix socket in a host folder bound (read-only) into it. Its gate
 * listens, before the release, on 127.0.0.1:3128 (the sandbox's own loopback, where HTTP_PROXY
 * points) and relays each connection to a new one on that socket, both ways, with half-close.
 * Each relayed connection first sends the class's egress token and a newline: the gate in the
 * proxy container (--egress-proxy, below) takes only connections that do, so a server that
 * connects to the socket itself (it is bound into the sandbox) is refused, and every byte that
 * reaches the proxy went through the gate. While the sandbox is frozen the gate relays nothing:
 * no accept, no byte either way (hintbox's freeze stops the network as well as the processes).
 *
 * The proxy container's side (hintbox-gate --egress-proxy SOCKET PROGRAM [ARG...], the token in
 * HINTBOX_GATE_EGRESS_TOKEN): listens on SOCKET, runs PROGRAM (Squid, on 127.0.0.1:3128 only),
 * and relays each connection that proves itself to a new one on 127.0.0.1:3128.
 */
enum { RELAY_PORT = 3128, MAX_PAIRS = 64, PAIR_BUF = 16384, TOKEN_MAX = 128, PROOF_MS = 2000 };

struct pair {
  int fd[2];             /* 0: the client's side (accepted); 1: the side the gate connected */
  char buf[2][PAIR_BUF]; /* buf[i]: read from fd[i], to be written to fd[1 - i] */
  size_t len[2];
  int eof[2];            /* fd[i] said it has no more to send */
  int shut[2];           /* fd[1 - i] was told so (shutdown for writing) */
  long long proof_due;     /* proxy side, before the proof: when the token line must be in (ms, monotonic) */
};
static struct pair pairs[MAX_PAIRS];
static int egress_listener = -1;
static int egress_proxy_side; /* 1 in the proxy container */
static char egress_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char egress_token[TOKEN_MAX + 2]; /* the token and a newline */
static size_t egress_token_len;
/* Set by 'S', cleared by 'C': nothing of the relay is polled in between. */
static int frozen;
/* Set by an 'S' that held, cleared by 'C': the gate watches that the sandbox stays as it froze it. */
static int watching;
static long long watch_due;

static void pair_close(struct pair *p) {
  for (int i = 0; i < 2; i++)
    if (p->fd[i] >= 0) close(p->fd[i]), p->fd[i] = -1;
}

/* A connection to the proxy's Unix socket (sandbox side) or to Squid on loopback (proxy side); -1 on failure. */
static int connect_onward(void) {
  int fd;
  int rc;
  if (egress_proxy_side) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(RELAY_PORT)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    do rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&addr, sizeof addr);
    while (rc != 0 && errno == EINTR);
  } else {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, egress_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    do rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&addr, sizeof addr);
    while (rc != 0 && errno == EINTR);
  }
  if (rc != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

/* Takes one waiting connection, when a slot is free. */
static void relay_accept(void) {
  int fd = accept4(egress_listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  struct pair *p = NULL;
  for (int i = 0; i < MAX_PAIRS && p == NULL; i++)
    if (pairs[i].fd[0] < 0) p = &pairs[i];
  if (p == NULL) {
    close(fd);
    return;
  }
  memset(p->len, 0, sizeof p->len), memset(p->eof, 0, sizeof p->eof), memset(p->shut, 0, sizeof p->shut);
  p->proof_due = now_ms() + PROOF_MS;
  p->fd[0] = fd;
  p->fd[1] = -1;
  if (egress_proxy_side) return; /* onward once the token is in */
  p->fd[1] = connect_onward();
  if (p->fd[1] < 0) {
    pair_close(p);
    return;
  }
  /* The token goes first, ahead of the client's bytes. */
  memcpy(p->buf[0], egress_token, egress_token_len);
  p->len[0] = egress_token_len;
}

/*
 * Proxy side: reads the token line of a new connection (into buf[0], where the bytes after it
 * wait to be relayed). 1 proved, 0 not yet, -1 refused. Nothing is compared before the whole
 * line is in (a newline, or more bytes than a token line has): then once, in constant time, so
 * that a wrong byte is refused exactly as late as a right one (no prefix oracle). A connection
 * that has not proved itself by its deadline is closed (relay_expire).
 */
static int relay_prove(struct pair *p) {
  ssize_t n = recv(p->fd[0], p->buf[0] + p->len[0], PAIR_BUF - p->len[0], 0);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  if (n == 0) return -1;
  p->len[0] += (size_t)n;
  char *end = memchr(p->buf[0], '\n', p->len[0]);
  if (end == NULL) return p->len[0] > TOKEN_MAX + 1 ? -1 : 0;
  size_t line = (size_t)(end - p->buf[0]) + 1;
  unsigned char diff = line != egress_token_len;
  for (size_t i = 0; i < egress_token_len; i++)
    diff |= (unsigned char)(p->buf[0][i] ^ egress_token[i]); /* in buf: TOKEN_MAX + 2 < PAIR_BUF */
  if (diff != 0) return -1;
  memmove(p->buf[0], p->buf[0] + line, p->len[0] - line);
  p->len[0] -= line;
  p->fd[1] = connect_onward();
  return p->fd[1] < 0 ? -1 : 1;
}

/* Proxy side: closes the connections past their proof deadline; the poll timeout until the next one (-1: none). */
static int relay_expire(void) {
  if (!egress_proxy_side) return -1;
  long long now = now_ms(), next = -1;
  for (int i = 0; i < MAX_PAIRS; i++) {
    struct pair *p = &pairs[i];
    if (p->fd[0] < 0 || p->fd[1] >= 0) continue;
    if (p->proof_due <= now) pair_close(p);
    else if (next < 0 || p->proof_due - now < next) next = p->proof_due - now;
  }
  return (int)next;
}

/* Fills the relay's poll entries (listener, then two per pair): none while frozen. */
static void relay_poll(struct pollfd *fds) {
  int room = 0;
  for (int i = 0; i < MAX_PAIRS; i++) room |= pairs[i].fd[0] < 0;
  fds[0] = (struct pollfd){.fd = !frozen && room ? egress_listener : -1, .events = POLLIN};
  for (int i = 0; i < MAX_PAIRS; i++) {
    struct pair *p = &pairs[i];
    for (int side = 0; side < 2; side++) {
      short events = 0;
      if (p->fd[side] >= 0 && !p->eof[side] && p->len[side] < PAIR_BUF) events |= POLLIN;
      if (p->fd[side] >= 0 && p->len[1 - side] > 0) events |= POLLOUT;
      /* A connection waiting for its proof: only its token is read. */
      if (egress_proxy_side && p->fd[1] < 0 && side == 0 && p->fd[0] >= 0) events = POLLIN;
      fds[1 + 2 * i + side] = (struct pollfd){.fd = !frozen && events ? p->fd[side] : -1, .events = events};
    }
  }
}

/* Moves what the poll said can move. */
static void relay_run(const struct pollfd *fds) {
  for (int i = 0; i < MAX_PAIRS; i++) {
    struct pair *p = &pairs[i];
    if (p->fd[0] < 0) continue;
    if (p->fd[1] < 0) {
      if (fds[1 + 2 * i].revents && relay_prove(p) < 0) pair_close(p);
      continue;
    }
    int broken = 0;
    for (int side = 0; side < 2 && !broken; side++) {
      short ready = fds[1 + 2 * i + side].revents;
      if (ready & POLLERR) broken = 1;
      if (!broken && (ready & (POLLIN | POLLHUP)) && !p->eof[side] && p->len[side] < PAIR_BUF) {
        ssize_t n = recv(p->fd[side], p->buf[side] + p->len[side], PAIR_BUF - p->len[side], 0);
        if (n > 0) p->len[side] += (size_t)n;
        else if (n == 0) p->eof[side] = 1;
        else if (errno != EAGAIN && errno != EINTR) broken = 1;
      }
      if (!broken && (ready & POLLOUT) && p->len[1 - side] > 0) {
        ssize_t n = send(p->fd[side], p->buf[1 - side], p->len[1 - side], MSG_NOSIGNAL);
        if (n > 0) {
          memmove(p->buf[1 - side], p->buf[1 - side] + n, p->len[1 - side] - (size_t)n);
          p->len[1 - side] -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          broken = 1;
        }
      }
    }
    /* Half-close: a side that ended and whose bytes are all through ends the other's input. */
    for (int side = 0; side < 2 && !broken; side++) {
      if (p->eof[side] && p->len[side] == 0 && !p->shut[side]) {
        shutdown(p->fd[1 - side], SHUT_WR);
        p->shut[side] = 1;
      }
    }
    if (broken || (p->shut[0] && p->shut[1])) pair_close(p);
  }
  if (fds[0].revents & POLLIN) relay_accept();
}

/*
 * Reads the relay's variables (and unsets them: the server gets neither). Sandbox side: listens
 * on 127.0.0.1:3128 when HINTBOX_GATE_EGRESS names a socket. 0, or -1 (said).
 */
static int egress_setup(const char *proxy_socket) {
  for (int i = 0; i < MAX_PAIRS; i++) pairs[i].fd[0] = pairs[i].fd[1] = -1;
  const char *target = proxy_socket ? proxy_socket : getenv("HINTBOX_GATE_EGRESS");
  const char *token = getenv("HINTBOX_GATE_EGRESS_TOKEN");
  int on = target != NULL && target[0] != 0;
  if (on && (token == NULL || strlen(token) == 0 || strlen(token) > TOKEN_MAX || strlen(target) >= sizeof egress_path)) {
    say("the egress relay needs a token (HINTBOX_GATE_EGRESS_TOKEN) and a short socket path", target);
    return -1;
  }
  if (on) {
    strcpy(egress_path, target);
    egress_token_len = (size_t)snprintf(egress_token, sizeof egress_token, "%s\n", token);
  }
  unsetenv("HINTBOX_GATE_EGRESS");
  unsetenv("HINTBOX_GATE_EGRESS_TOKEN");
  if (!on) return 0;
  int fd;
  int rc;
  if (proxy_socket) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, egress_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&addr, sizeof addr);
    /* Others reach the socket only through its folder, which hintbox keeps to the sandbox's group. */
    if (rc == 0) rc = chmod(egress_path, 0666);
  } else {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(RELAY_PORT)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int yes = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&addr, sizeof addr);
  }
  if (rc != 0 || listen(fd, 64) != 0) {
    say("cannot listen for the egress relay", strerror(errno));
    return -1;
  }
  egress_listener = fd;
  return 0;
}

/* The status the gate exits with for the server's wait status. */
static int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : GATE_FAILED;
}

/* Answers one of hintbox's commands. */
static char obey(char command) {
  /* Frozen from the command on, whatever its answer: a failed freeze is removed, not relayed. */
  if (command == 'S') {
    frozen = 1;
    watching = stop_all() == 0;
    watch_due = now_ms() + WATCH_MS;
    return watching ? 'S' : 'F';
  }
  if (command == 'C') return frozen = 0, watching = 0, kill(-1, SIGCONT) == 0 || errno == ESRCH ? 'C' : 'F';
  return '?';
}

/*
 * While frozen: each task of the freeze's last pass read again (its status file alone, no
 * listing of /proc: a task can only be made by one that ran, and that one's counts would have
 * moved). 1 when every one is still stopped and was not scheduled since (its context-switch
 * counts unchanged); 0 when one ran, is gone or dead, or could not be read (fail closed).
 */
static int still_frozen(void) {
  char path[64], text[16384];
  for (int i = 0; i < watched; i++) {
    snprintf(path, sizeof path, "/proc/%ld/status", passes[1][i].tid);
    if (read_small(path, text, sizeof text) < 0) return 0;
    const char *state = strstr(text, "\nState:\t");
    if (state == NULL || strstr(text, "\nvoluntary_ctxt_switches:") == NULL ||
        strstr(text, "\nnonvoluntary_ctxt_switches:") == NULL)
      return 0;
    char letter = state[strlen("\nState:\t")];
    if (letter != 'T' && letter != 't') return 0;
    unsigned long long switches = field(text, "\nvoluntary_ctxt_switches:") + field(text, "\nnonvoluntary_ctxt_switches:");
    if (switches != passes[1][i].switches) return 0;
  }
  return 1;
}

/*
 * Stdio mode's relay (see the top): the attach (the gate's stdin and stdout) on one side, the
 * server's stdin and stdout pipes on the other.
 */
struct relay {
  int to_server, from_server; /* -1: none (socket mode), or closed */
  char pending[PENDING_MAX];  /* hintbox's data not yet taken by the server */
  size_t pending_len;
  int state;        /* 0: a frame's type; 1..4: its length's bytes; 5: its data */
  uint32_t left;    /* data bytes of the current frame still to come */
};
static struct relay relay = {.to_server = -1, .from_server = -1};

/* Writes one frame of the server's output to hintbox. */
static int send_data(const char *buf, size_t len) {
  unsigned char head[5] = {'D', (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len};
  return write_all(STDOUT_FILENO, (const char *)head, sizeof head) == 0 && write_all(STDOUT_FILENO, buf, len) == 0 ? 0 : -1;
}

/* Takes what hintbox sent on the attach: data for the server, commands for the gate. 0, or -1 (fail closed). */
static int take_input(const unsigned char *buf, size_t len) {
  for (size_t i = 0; i < len;) {
    if (relay.state == 0) {
      char c = (char)buf[i++];
      if (c == 'D') {
        relay.state = 1;
        relay.left = 0;
      } else if (c == 'S' || c == 'C') {
        char answer = obey(c);
        if (write_all(STDOUT_FILENO, &answer, 1) != 0) return -1;
      } else {
        say("an unknown frame from hintbox", NULL);
        return -1;
      }
    } else if (relay.state <= 4) {
      relay.left = (relay.left << 8) | buf[i++];
      relay.state = relay.state == 4 ? (relay.left ? 5 : 0) : relay.state + 1;
    } else {
      size_t n = len - i < relay.left ? len - i : relay.left;
      if (relay.to_server >= 0) memcpy(relay.pending + relay.pending_len, buf + i, n), relay.pending_len += n;
      i += n;
      relay.left -= (uint32_t)n;
      if (relay.left == 0) relay.state = 0;
    }
  }
  return 0;
}

/* Relays what the server wrote so far (non-blocking); -1 when its stdout is closed. */
static int relay_output(void) {
  char buf[CHUNK];
  ssize_t n;
  do n = read(relay.from_server, buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n > 0) return send_data(buf, (size_t)n) == 0 ? 0 : -2;
  if (n < 0 && errno == EAGAIN) return 0;
  close(relay.from_server);
  relay.from_server = -1;
  return -1;
}

/*
 * After the release: the first process of the sandbox, until the server exits. `control` is the
 * control connection (socket mode) or the attach's stdin (stdio mode, framed).
 */
static int supervise(pid_t server, int control, int signals, int stdio) {
  for (;;) {
    int framed_room = !stdio || PENDING_MAX - relay.pending_len >= CHUNK;
    /* One poll for everything: hintbox, the server's stdio, signals, and the egress relay. */
    struct pollfd fds[5 + 2 * MAX_PAIRS] = {
        {.fd = signals, .events = POLLIN},
        {.fd = framed_room ? control : -1, .events = POLLIN},
        {.fd = relay.from_server, .events = POLLIN},
        {.fd = relay.pending_len ? relay.to_server : -1, .events = POLLOUT},
    };
    relay_poll(fds + 4);
    long long wait = watching ? watch_due - now_ms() : -1;
    if (poll(fds, sizeof fds / sizeof fds[0], watching ? (wait > 0 ? (int)wait : 0) : -1) < 0) {
      if (errno == EINTR) continue;
      say("poll", strerror(errno));
      kill(-1, SIGKILL);
      return GATE_FAILED;
    }
    /*
     * Frozen, the sandbox ran all the same (woken by a signal not from hintbox): it is killed
     * whole, at once, and hintbox told so ('B', unasked) before the gate exits.
     */
    if (watching && now_ms() >= watch_due) {
      if (!still_frozen()) {
        kill(-1, SIGKILL);
        say("the sandbox ran while frozen (woken by a signal not from hintbox): killed", NULL);
        char broke = 'B';
        if (stdio) (void)write_all(STDOUT_FILENO, &broke, 1);
        else (void)send(control, &broke, 1, MSG_NOSIGNAL);
        return GATE_WOKEN;
      }
      watch_due = now_ms() + WATCH_MS;
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      if (read(signals, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo == SIGCHLD) {
          int status;
          pid_t pid;
          while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid != server) continue;
            /* What the server wrote before it exited still reaches hintbox. */
            while (relay.from_server >= 0 && relay_output() == 0 && relay.from_server >= 0) {
              struct pollfd more = {.fd = relay.from_server, .events = POLLIN};
              if (poll(&more, 1, 0) <= 0) break;
            }
            return exit_code(status);
          }
        } else {
          kill(server, (int)info.ssi_signo);
        }
      }
    }
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (relay_output() == -2) {
        kill(-1, SIGKILL);
        return GATE_FAILED;
      }
    }
    if (fds[3].revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t n = write(relay.to_server, relay.pending, relay.pending_len);
      if (n > 0) {
        memmove(relay.pending, relay.pending + n, relay.pending_len - (size_t)n);
        relay.pending_len -= (size_t)n;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        /* The server closed its stdin: what it would not read is dropped. */
        close(relay.to_server);
        relay.to_server = -1;
        relay.pending_len = 0;
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      unsigned char buf[CHUNK];
      ssize_t n;
      do n = read(control, buf, stdio ? sizeof buf : 1);
      while (n < 0 && errno == EINTR);
      if (n <= 0) {
        /* hintbox is gone: nothing of the sandbox may run on without it. */
        kill(-1, SIGKILL);
        return GATE_FAILED;
      }
      if (stdio) {
        if (take_input(buf, (size_t)n) != 0) {
          kill(-1, SIGKILL);
          return GATE_FAILED;
        }
        continue;
      }
      char answer = obey((char)buf[0]);
      if (send(control, &answer, 1, MSG_NOSIGNAL) != 1) {
        kill(-1, SIGKILL);
        return GATE_FAILED;
      }
      /*
       * What the relay's entries said was polled before the command: after a freeze none of it
       * may move (a connection made just before it waits, unaccepted, until the thaw).
       */
      continue;
    }
    if (!frozen) relay_run(fds + 4);
  }
}

/* The proxy container's first process (see the egress relay): runs `program` and relays to it. */
static int egress_proxy(const char *socket_path, char **program) {
  egress_proxy_side = 1;
  if (egress_setup(socket_path) != 0 || egress_listener < 0) return GATE_FAILED;
  sigset_t handled, before;
  sigemptyset(&handled);
  int forwarded[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&handled, forwarded[i]);
  int signals = sigprocmask(SIG_BLOCK, &handled, &before) == 0 ? signalfd(-1, &handled, SFD_CLOEXEC) : -1;
  pid_t child = signals < 0 ? -1 : fork();
  if (child < 0) {
    say("cannot start the proxy", strerror(errno));
    return GATE_FAILED;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &before, NULL);
    execvp(program[0], program);
    say("cannot run the proxy", strerror(errno));
    _exit(EXEC_FAILED);
  }
  for (;;) {
    struct pollfd fds[2 + 2 * MAX_PAIRS] = {{.fd = signals, .events = POLLIN}};
    int timeout = relay_expire(); /* before the poll entries: it may close connections */
    relay_poll(fds + 1);
    if (poll(fds, sizeof fds / sizeof fds[0], timeout) < 0) {
      if (errno == EINTR) continue;
      kill(child, SIGKILL);
      return GATE_FAILED;
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      if (read(signals, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo != SIGCHLD) {
          kill(child, (int)info.ssi_signo);
        } else {
          int status;
          pid_t pid;
          while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            if (pid == child) return exit_code(status);
        }
      }
    }
    relay_run(fds + 1);
  }
}

int main(int argc, char **argv) {
  /*
   * Not dumpable: the server runs as the gate's user, and without this it could ptrace the gate,
   * write its memory through /proc/1/mem, or take its control connection with pidfd_getfd, and
   * answer a freeze itself (where Yama does not stop it). exec resets this for the server only.
   */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    say("cannot make the gate undumpable", strerror(errno));
    return GATE_FAILED;
  }
  /*
   * Proxy mode is the proxy container's only. In a sandbox argv[1] is the image's (its
   * ENTRYPOINT), so the mode is never taken from argv alone: hintbox sets HINTBOX_GATE_SOCKET, not
   * empty, in every sandbox (a path, or "-" on Kubernetes; an image's ENV cannot unset it), and
   * never in the proxy container. A sandbox whose command starts so is refused before anything runs.
   */
  if (argc >= 2 && strcmp(argv[1], "--egress-proxy") == 0) {
    const char *sandbox = getenv("HINTBOX_GATE_SOCKET");
    if (sandbox != NULL && sandbox[0] != 0) {
      say("refused: --egress-proxy is the egress proxy's mode, never a sandbox's (HINTBOX_GATE_SOCKET is set)", NULL);
      return GATE_FAILED;
    }
    if (argc < 4) {
      say("usage", "HINTBOX_GATE_EGRESS_TOKEN=HEX hintbox-gate --egress-proxy SOCKET PROGRAM [ARG...]");
      return GATE_FAILED;
    }
    unsetenv("HINTBOX_GATE_SOCKET");
    unsetenv("HINTBOX_GATE_TOKEN");
    unsetenv("HINTBOX_GATE_TUNABLES");
    return egress_proxy(argv[2], argv + 3);
  }
  const char *path = getenv("HINTBOX_GATE_SOCKET");
  const char *token = getenv("HINTBOX_GATE_TOKEN");
  if (path == NULL || token == NULL || argc < 2) {
    say("usage", "HINTBOX_GATE_SOCKET=PATH HINTBOX_GATE_TOKEN=HEX hintbox-gate PROGRAM [ARG...]");
    return GATE_FAILED;
  }
  /*
   * "-": the channel is the gate's own stdin and stdout (on Kubernetes, the API's attach to the
   * Pod: no host folder to bind a socket from). The token then only says the gate is up; after
   * the release the gate relays the attach to the server in frames (see the top). It waits to be asked ('?') before it answers with the token: an attach carries only what the
   * container writes after it, and the container starts before hintbox can attach.
   */
  int stdio = strcmp(path, "-") == 0;
  int fd = STDIN_FILENO, control = -1;
  if (stdio) {
    char ask = 0;
    ssize_t asked;
    do asked = read(STDIN_FILENO, &ask, 1);
    while (asked < 0 && errno == EINTR);
    if (asked != 1 || ask != '?') return GATE_FAILED; /* not hintbox, or it went: the server never runs */
    if (write_all(STDOUT_FILENO, token, strlen(token)) != 0 || write_all(STDOUT_FILENO, "\n", 1) != 0) {
      say("cannot send the token to hintbox", strerror(errno));
      return GATE_FAILED;
    }
  } else {
    /* Not close-on-exec: the descriptor becomes the server's stdin and stdout. */
    fd = connect_gate(path, token, "\n", 0);
    if (fd < 0) return GATE_FAILED;
    control = connect_gate(path, token, "+\n", SOCK_CLOEXEC);
    if (control < 0) return GATE_FAILED;
  }
  /* Before the release: the server finds the relay listening, and none of its variables. */
  if (egress_setup(NULL) != 0) return GATE_FAILED;
  /* hintbox's, not the server's: it does not inherit them. */
  unsetenv("HINTBOX_GATE_SOCKET");
  unsetenv("HINTBOX_GATE_TOKEN");
  if (restore_tunables() != 0) {
    say("cannot restore GLIBC_TUNABLES", strerror(errno));
    return GATE_FAILED;
  }

  char release = 0;
  ssize_t n;
  do n = read(fd, &release, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || release != 'G') return GATE_FAILED; /* not released: the server never runs */

  int server_in = fd, server_out = fd;
  if (stdio) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      say("cannot make the server's pipes", strerror(errno));
      return GATE_FAILED;
    }
    server_in = in[0];
    server_out = out[1];
    relay.to_server = in[1];
    relay.from_server = out[0];
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    control = STDIN_FILENO;
  }
  /* Blocked before the fork, so that none is lost; the server gets the mask it would have had. */
  sigset_t handled, before;
  sigemptyset(&handled);
  int forwarded[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&handled, forwarded[i]);
  if (sigprocmask(SIG_BLOCK, &handled, &before) != 0) {
    say("cannot block signals", strerror(errno));
    return GATE_FAILED;
  }
  int signals = signalfd(-1, &handled, SFD_CLOEXEC);
  if (signals < 0) {
    say("cannot open a signalfd", strerror(errno));
    return GATE_FAILED;
  }
  pid_t server = fork();
  if (server < 0) {
    say("cannot start the server", strerror(errno));
    return GATE_FAILED;
  }
  if (server > 0) {
    if (stdio) {
      close(server_in);
      close(server_out);
      /* A server that closed its stdin must not kill the gate by SIGPIPE (set after the fork: it is inherited). */
      signal(SIGPIPE, SIG_IGN);
    } else {
      close(fd);
    }
    return supervise(server, control, signals, stdio);
  }
  sigprocmask(SIG_SETMASK, &before, NULL);
  if ((server_in != STDIN_FILENO && dup2(server_in, STDIN_FILENO) < 0) ||
      (server_out != STDOUT_FILENO && dup2(server_out, STDOUT_FILENO) < 0)) {
    say("cannot hand the connection to the server", strerror(errno));
    _exit(GATE_FAILED);
  }
  if (fd > STDERR_FILENO) close(fd);
  execvp(argv[1], argv + 1);
  say("cannot run the server", strerror(errno));
  say("command", argv[1]);
  _exit(EXEC_FAILED);
}
